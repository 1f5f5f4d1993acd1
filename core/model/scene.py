"""A simulation setup: cloth, time discretization, initial state, colliders, controls."""

import numpy as np

from .cloth import Cloth


def _array(value, shapes, what):
    """value as float64 broadcast to the last of `shapes` (the full shape); NaN/inf rejected."""
    arr = np.array(value, dtype=np.float64)
    full = shapes[-1]
    if arr.shape not in shapes:
        allowed = " or ".join(str(s) for s in shapes)
        raise ValueError(f"{what} must have shape {allowed}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} has a NaN or infinite value")
    return np.array(np.broadcast_to(arr, full))


# the solvers and their default contact smoothing (m)
SOLVERS = {"newton": 0.0, "linearized": 1e-3}


def at_step(frames, s, substeps):
    """A per-frame quantity (frames+1, ...) after integrator step s, linear between frames."""
    f, r = divmod(s, substeps)
    if r == 0:
        return frames[f]
    w = r / substeps
    return (1 - w) * frames[f] + w * frames[f + 1]


# the largest self distance, in shortest rest edges: pairs within 1.25·self_distance at rest never
# collide (core.contact.self_contact.REST), so beyond this a vertex's neighbourhood two and a half
# cells out would be left out, and a fold that tight would pass through itself
SELF_DISTANCE_EDGES = 2.0


def max_self_distance(cloth):
    """The largest self distance a cloth allows (m): SELF_DISTANCE_EDGES of its shortest rest edge."""
    return SELF_DISTANCE_EDGES * float(np.linalg.norm(np.subtract(*cloth.rest[cloth.tension_edges.T]), axis=1).min())


class Scene:
    """Everything `simulate` needs.

    steps frames of dt seconds are simulated, each as `substeps` implicit Euler steps of
    h = dt/substeps; trajectories and losses address frames 0..steps. forces (steps, n, 3) act
    during frame f → f+1; pin_path (steps+1, n_pinned, 3) gives the pinned vertices' positions
    at every frame (in the order of cloth.pinned), linearly interpolated between frames.
    contact_stiffness κ (N/m per kg, i.e. 1/s²) is the colliders' penalty stiffness per unit of
    vertex mass: a vertex of mass m is pushed out with κ·m·depth, so the cloth sinks g/κ under
    its own weight (1e5: 0.1 mm) at any resolution, and the contact is as stiff, relative to the
    cloth's inertia, on every mesh. contact_thickness (m) is the distance kept from colliders.
    tol bounds the Newton residual h²·|∇E|/m (metres) relative to the cloth's size, unless
    rounding of the positions keeps it higher (stiff bending on fine cells): a step then stops at
    that floor, converged if it is within 1e3·tol. max_newton caps the iterations of one step.
    The cap is generous: while a flat cloth first buckles, a fold can creep across the mesh one
    cell per few iterations (64×64 thesis cloth with k_s = 25: 231 iterations in its first
    step), and that step still converges.

    solver: "newton" converges every implicit Euler step (tol, max_newton); "linearized" takes
    one Newton step of the incremental potential from the inertial prediction x + h·v with a
    smooth positive-definite (projected) matrix: one factorization a step whatever the stiffness,
    never a failed solve, a map whose gradients are exact for the discrete system as built (its
    matrix's derivatives included), and the same rest states (a drape at rest is a fixed point of
    both). contact_smoothing (m): the depth over which contact stiffness rises smoothly (None:
    0 for "newton", 1 mm for "linearized", whose step must not jump as contacts begin).
    self_distance (m): the distance the cloth keeps from itself (core.contact.self_contact), with the
    colliders' penalty; 0 turns self-collision off; at most twice the shortest rest edge.
    self_friction: Coulomb's μ between the cloth's layers where they touch (the colliders' lagged
    friction, a vertex slipping against a triangle); 0 none.
    """

    def __init__(
        self,
        cloth,
        steps=100,
        dt=0.1,
        substeps=1,
        gravity=(0.0, 0.0, -9.81),
        colliders=(),
        contact_stiffness=1e5,
        contact_thickness=0.0,
        x0=None,
        v0=0.0,
        forces=None,
        pin_path=None,
        tol=1e-10,
        max_newton=500,
        solver="newton",
        contact_smoothing=None,
        self_distance=0.0,
        self_friction=0.0,
    ):
        if not isinstance(cloth, Cloth):
            raise ValueError("cloth must be a core.Cloth")
        self.cloth = cloth
        n = cloth.n
        if int(steps) != steps or steps < 1:
            raise ValueError(f"steps (frames) must be a positive integer, got {steps}")
        if int(substeps) != substeps or substeps < 1:
            raise ValueError(f"substeps must be a positive integer, got {substeps}")
        if not (np.isfinite(dt) and dt > 0):
            raise ValueError(f"time step dt must be positive, got {dt}")
        if not (np.isfinite(contact_stiffness) and contact_stiffness > 0):
            raise ValueError(f"contact stiffness must be positive (N/m per kg), got {contact_stiffness}")
        if not (np.isfinite(contact_thickness) and contact_thickness >= 0):
            raise ValueError(f"contact thickness must be non-negative, got {contact_thickness}")
        if not (tol > 0 and int(max_newton) >= 1):
            raise ValueError("tol must be positive and max_newton at least 1")
        self.steps, self.substeps, self.dt = int(steps), int(substeps), float(dt)
        self.gravity = _array(gravity, [(3,)], "gravity")
        self.colliders = list(colliders)
        for col in self.colliders:
            if col.n_poses() not in (1, self.steps + 1):
                raise ValueError(f"a moving collider needs one pose per frame ({self.steps + 1}), got {col.n_poses()}")
        self.contact_stiffness = float(contact_stiffness)
        self.contact_thickness = float(contact_thickness)
        self.x0 = _array(cloth.rest if x0 is None else x0, [(n, 3)], "x0")
        self.v0 = _array(v0, [(), (3,), (n, 3)], "v0")
        self.forces = None if forces is None else _array(forces, [(), (3,), (n, 3), (self.steps, n, 3)], "forces")
        npin = len(cloth.pinned)
        self.pin_path = None if pin_path is None else _array(pin_path, [(self.steps + 1, npin, 3)], "pin_path")
        self.tol, self.max_newton = float(tol), int(max_newton)
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(map(repr, SOLVERS))}, got {solver!r}")
        self.solver = solver
        if contact_smoothing is None:
            contact_smoothing = SOLVERS[solver]
        if not (np.isfinite(contact_smoothing) and contact_smoothing >= 0):
            raise ValueError(f"contact smoothing must be non-negative, got {contact_smoothing}")
        self.contact_smoothing = float(contact_smoothing)
        if not (np.isfinite(self_distance) and self_distance >= 0):
            raise ValueError(f"self distance must be non-negative (0: no self-collision), got {self_distance}")
        limit = max_self_distance(cloth)
        if self_distance > limit:
            raise ValueError(
                f"self distance {self_distance:g} m is more than this cloth allows ({limit:.4g} m, twice its "
                "shortest edge): lower it, or use a coarser mesh"
            )
        self.self_distance = float(self_distance)
        if not (np.isfinite(self_friction) and self_friction >= 0):
            raise ValueError(f"self friction must be non-negative, got {self_friction}")
        self.self_friction = float(self_friction)

    _fields = (
        "cloth",
        "steps",
        "dt",
        "substeps",
        "gravity",
        "colliders",
        "contact_stiffness",
        "contact_thickness",
        "x0",
        "v0",
        "forces",
        "pin_path",
        "tol",
        "max_newton",
        "solver",
        "contact_smoothing",
        "self_distance",
        "self_friction",
    )

    def replace(self, **changes):
        """A copy with some fields changed (validated like the constructor)."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise ValueError(f"unknown Scene field(s): {', '.join(sorted(unknown))}")
        args = {f: getattr(self, f) for f in self._fields}
        if "solver" in changes and "contact_smoothing" not in changes:
            args["contact_smoothing"] = None  # the new solver's default
        args.update(changes)
        return Scene(**args)

    @property
    def h(self):
        return self.dt / self.substeps

    @property
    def n_steps(self):
        return self.steps * self.substeps

    @property
    def pin_frames(self):
        """(steps+1, n_pinned, 3): where the pinned vertices are at every frame (the pin path, else
        where x0 has them)."""
        if self.pin_path is not None:
            return self.pin_path
        return np.repeat(self.x0[None, self.cloth.pinned], self.steps + 1, axis=0)

    def pins_at(self, s):
        """Positions of the pinned vertices after integrator step s (s = 0 is the start)."""
        if self.pin_path is None:
            return self.x0[self.cloth.pinned]
        return at_step(self.pin_path, s, self.substeps)

    def max_control_acceleration(self):
        """The largest control acceleration (m/s²) a vertex gets, force over its mass: compare it
        with gravity to tell physics from puppetry."""
        if self.forces is None:
            return 0.0
        return float(np.linalg.norm(self.forces / self.cloth.masses[None, :, None], axis=2).max())

    def force_at(self, s):
        """Control force (n,3) acting during integrator step s → s+1, or None."""
        return None if self.forces is None else self.forces[s // self.substeps]
