"""Time stepping: the implicit Euler step, its linear algebra, the simulation loop."""
