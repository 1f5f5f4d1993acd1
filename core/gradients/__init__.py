"""Exact derivatives of a simulation: adjoint (reverse) and tangent (forward) passes."""
