"""Numerics every layer may use: banded and sparse block systems, BLAS threads, timing."""
