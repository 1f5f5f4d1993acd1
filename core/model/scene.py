"""A simulation setup: cloth, time discretization, initial state, colliders, controls."""

import functools

import numpy as np

from .cloth import Cloth
from .effectors import Effector
from .frames import at_step, checked_array, field_frame
from .material import SHEET
from .mesh import crossing_pairs, hinge_weights

# the solvers and their default contact smoothing (m)
SOLVERS = {"newton": 0.0, "linearized": 1e-3}


# the largest self distance, in shortest rest edges: pairs within 1.25·self_distance at rest never
# collide (core.contact.self_contact.REST), so beyond this a vertex's neighbourhood two and a half
# cells out would be left out, and a fold that tight would pass through itself
SELF_DISTANCE_EDGES = 2.0


def max_self_distance(cloth):
    """The largest self distance a cloth allows (m): SELF_DISTANCE_EDGES of its shortest rest edge."""
    return SELF_DISTANCE_EDGES * float(cloth.rest_lengths[: cloth.n_tension].min())


# Limits on a step's stiffness that keep the motion right (docs/solver.md, "Stiffness, mass and
# damping at their bounds"), in h²·K/m: K a term's diagonal at a dof, m the vertex's mass × (1 + h·c).
# Beyond this, double precision's rounding moves a free plate off g by more than 1e-3
PRECISION_STIFFNESS = 1e12
# Newton stops at its residual's rounding floor ε·|x|·h²K/m, converged within 1e3·tol
# (integrator.FLOOR_SLACK): this margin under it (a 12×12 plate of bending 1e5 N·m, 3.9e8, failed)
NEWTON_FLOOR = 250.0
# a linearized step's hinge matrix bounded to mesh edges (terms.hinges.HingeBending.pair_couplings(bound=True))
# resists rigid rotation, as a zero-length spring between each hinge's opposite vertices: beyond this
# h² times that stiffness over the cloth's polar inertia (hinge_drag), the step takes the exact hinge
# matrix instead, whose pattern is twice as wide (HINGE_DRAG_EXACT: docs/solver.md)
HINGE_DRAG_EXACT = 1.0
# a linearized step locks stiff stretch: (h·c/size)², c² = stretch/density the in-plane wave speed
# (Σ k·L²/(SHEET·mass), for any springs), beyond which that plate swings 10% short
STRETCH_LOCK = 2000.0

# what the quantities are called in core's messages; the add-on passes its panel's labels
API_NAMES = {
    "bending": "bending rigidity",
    "stretch": "stretch stiffness",
    "compression": "compression stiffness",
    "shear": "shear stiffness",
    "density": "density",
    "tension": "k_tension",
    "mass": "mass",
    "contact": "contact_stiffness",
    "substeps": "substeps",
    "linearized": 'solver="linearized"',
    "newton": 'solver="newton"',
}


class BoundsError(ValueError):
    """A setting beyond what the solver simulates right, named as `names` says (API_NAMES for
    str()); quantity is its key there."""

    def __init__(self, quantity, template):
        self.quantity, self.template = quantity, template
        super().__init__(self.message(API_NAMES))

    def message(self, names):
        return self.template.format(**names)


def _stiffness_parts(scene):
    """Per vertex, h²·K_ii/m of the bending and tension terms ((n,) each; K_ii bounded by Σk for
    springs, whatever their direction), and of contact (a scalar, 0 without colliders)."""
    cloth, h = scene.cloth, scene.h
    m = cloth.masses * (1.0 + h * cloth.damping) / h**2
    springs = np.concatenate([cloth.tension_edges, cloth.shear_edges])
    k = np.concatenate([np.maximum(cloth.k_tension, cloth.k_compression), cloth.k_shear])
    tension = np.bincount(springs.ravel(), np.repeat(k, 2), cloth.n)
    if cloth.bending == "hinge":
        w, area = hinge_weights(cloth.rest, cloth.hinges)
        bending = np.bincount(cloth.hinges.ravel(), ((cloth.k_bending / area)[:, None] * w**2).ravel(), cloth.n)
    else:
        bending = np.bincount(cloth.bending_edges.ravel(), np.repeat(cloth.k_bending, 2), cloth.n)
    contacts = scene.colliders or scene.self_distance > 0
    return bending / m, tension / m, (scene.h**2 * scene.contact_stiffness if contacts else 0.0)


def hinge_drag(scene):
    """How much a linearized step's hinge matrix bounded to mesh edges would hold the cloth from
    swinging: h² times the zero-length springs it puts between each hinge's opposite vertices, over
    the cloth's polar inertia (a plate pinned at two corners swings 10% short at 20)."""
    cloth, h = scene.cloth, scene.h
    m = cloth.masses * (1.0 + h * cloth.damping)
    w, area = hinge_weights(cloth.rest, cloth.hinges)
    d2 = np.sum((cloth.rest[cloth.hinges[:, 2]] - cloth.rest[cloth.hinges[:, 3]]) ** 2, axis=1)
    r2 = np.sum((cloth.rest - (m[:, None] * cloth.rest).sum(0) / m.sum()) ** 2, axis=1)
    return h**2 * float(np.sum(cloth.k_bending / area * np.abs(w[:, 2] * w[:, 3]) * d2)) / float(m @ r2)


def check_bounds(scene):
    """Raise BoundsError where a stiffness, the mass or the contact stiffness is beyond what the
    scene's solver simulates right at its time step (docs/solver.md), naming the setting, its value
    and the tightest limit that follows from the mesh and the step."""
    cloth, h = scene.cloth, scene.h
    size = float(np.ptp(cloth.rest, axis=0).max())
    lengths = cloth.rest_lengths[: cloth.n_tension + cloth.n_shear]  # the in-plane springs
    over = []  # (factor beyond its limit, term, why, remedy): every limit scales a term's value

    bending, tension, contact = _stiffness_parts(scene)
    if scene.solver == "newton":
        total = bending + tension + contact
        limit = NEWTON_FLOOR * scene.tol * size / (np.finfo(float).eps * max(np.abs(scene.x0).max(), size))
        why, remedy = "Newton's rounding floor", "lower it or raise {substeps}"
    else:  # contact needs no precision there: it holds vertices, it makes no soft mode
        total, contact = bending + tension, 0.0
        limit, why, remedy = PRECISION_STIFFNESS, "double precision's limit", "lower it or raise {substeps}"
    i = int(np.argmax(total))
    parts = {"bending": bending[i], "tension": tension[i], "contact": contact}
    over.append((total[i] / limit, max(parts, key=parts.get), why, remedy))
    if scene.solver == "linearized":
        m = cloth.masses * (1.0 + h * cloth.damping)
        k = np.concatenate([cloth.k_tension, cloth.k_shear])
        lock = h**2 * float(np.sum(k * lengths**2)) / (SHEET * float(m.sum()) * size**2)
        remedy = "lower it, raise {substeps}, or use {newton}"
        over.append((lock / STRETCH_LOCK, "tension", "the linearized step locks stiffer stretch", remedy))
    factor, term, why, remedy = max(over, key=lambda o: o[0])
    if factor <= 1.0:
        return
    fabric = cloth.fabric
    if fabric is not None:
        # the in-plane stiffness named: the largest of the fabric's (stretch where they are equal)
        in_plane = [
            (fabric.stretch, "stretch"),
            (fabric.compression or 0.0, "compression"),
            (fabric.shear or 0.0, "shear"),
        ]
        stiffest, which = max(in_plane, key=lambda v: v[0])
        values = {"bending": ("bending", fabric.bending, "N·m"), "tension": (which, stiffest, "N/m")}
        light = ("density", fabric.density, "kg/m²")
    else:
        unit = "N·m" if cloth.bending == "hinge" else "N/m"
        values = {
            "bending": ("bending", cloth.k_bending.max(), unit),
            "tension": ("tension", cloth.k_tension.max(), "N/m"),
        }
        light = ("mass", cloth.mass, "kg")
    values["contact"] = ("contact", scene.contact_stiffness, "N/m per kg")
    key, value, unit = values[term]
    step = f"1/{round(1 / h)} s" if abs(1 / h - round(1 / h)) < 1e-6 else f"{h:.3g} s"
    cells = float(np.median(lengths))
    raise BoundsError(  # every term scales with 1/mass: the least mass that holds
        key,
        f"{{{key}}} {value:.3g} {unit} is too stiff for this cloth's {cells * 100:.2g} cm cells at {step} steps: "
        f"at most {value / factor:.2g} ({why}), or {{{light[0]}}} at least {light[1] * factor:.2g} {light[2]}; "
        + remedy,
    )


class Goals:
    """Soft pins, as Blender's Cloth makes of a pin group's partial weights: each of `vertices`
    pulled toward its goal by a zero-length spring of `stiffness` (N/m, one per vertex), the goal
    at path (frames+1, G, 3) per frame, linear between frames (None: where the cloth's rest mesh
    has them). Not a design: optimizations leave them as they are."""

    def __init__(self, vertices, stiffness, path=None):
        self.vertices = np.asarray(vertices, dtype=np.int64).ravel()
        self.stiffness = np.broadcast_to(np.asarray(stiffness, dtype=np.float64), self.vertices.shape).copy()
        self.path = None if path is None else np.asarray(path, dtype=np.float64)
        if len(np.unique(self.vertices)) != len(self.vertices):
            raise ValueError("goals: a vertex is given twice")
        if not (np.isfinite(self.stiffness).all() and (self.stiffness > 0).all()):
            raise ValueError("goals: every stiffness must be positive")

    def checked(self, scene):
        """These goals, once they fit scene's cloth and frames (else ValueError)."""
        cloth, v = scene.cloth, self.vertices
        if len(v) and (v.min() < 0 or v.max() >= cloth.n):
            raise ValueError(f"goals: vertex {int(v[(v < 0) | (v >= cloth.n)][0])} is out of range 0..{cloth.n - 1}")
        if np.isin(v, cloth.pinned).any():
            raise ValueError(f"goals: vertex {int(v[np.isin(v, cloth.pinned)][0])} is pinned already")
        if self.path is not None:
            self.path = checked_array(self.path, [(scene.steps + 1, len(v), 3)], "goals path")
        return self

    def at(self, scene, s):
        """The goals after integrator step s (G,3)."""
        if self.path is None:
            return scene.cloth.rest[self.vertices]
        return at_step(self.path, s, scene.substeps)


@functools.lru_cache(maxsize=2)
def _crossing(x, tris):
    """crossing_pairs (K,2) of positions and triangles given as bytes, read-only, the last two
    kept: a run checks its start as it joins its cloths and again as it simulates (3 ms each on
    the character's 816 vertices)."""
    pairs = np.reshape(crossing_pairs(np.frombuffer(x).reshape(-1, 3), np.frombuffer(tris, np.int64)), (-1, 2))
    pairs.setflags(write=False)
    return pairs


class Scene:
    """Everything `simulate` needs.

    steps frames of dt seconds are simulated, each as `substeps` implicit Euler steps of
    h = dt/substeps; trajectories and losses address frames 0..steps. forces (steps, n, 3) act
    during frame f → f+1; pin_path (steps+1, n_pinned, 3) gives the pinned vertices' positions
    at every frame (in the order of cloth.pinned), linearly interpolated between frames.
    goals: soft pins (Goals), or None. wind (3,) or per frame (steps+1, 3), linear between frames:
    a wind field's velocity, pressing on each triangle as Blender's Cloth presses it
    (core.terms.effectors), or None. wind_drag κ ≥ 0: how much of the cloth's own velocity the wind
    takes away, each vertex pressed by w − κ·v (Blender: the cloth's Field Weights, All × Wind, times
    the uniform fields' Flow, summed over them; 1 for one field at full weight). effectors: Blender's force fields (core.Effector: Wind with
    falloff, Force, Vortex, Drag), as its Cloth feels them.
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
    friction, a vertex slipping against a triangle); 0 none. self_pieces (n,) int, or None: per
    vertex, its piece (a cloth of a joined cloth, core.Joined): vertices and triangles of
    different pieces are never left out for being near at rest, they meet wherever they come
    within the self distance. self_within (pieces,) bool, or None (all): whether each piece
    collides with itself (else its vertices meet only the other pieces' triangles).
    bounds: refuse (BoundsError) a stiffness, mass or contact stiffness beyond what the solver
    simulates right at this step (check_bounds). replace() leaves them to the simulation: a design
    an optimizer tries may step beyond them, and then fails as a SimulationError would.
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
        goals=None,
        wind=None,
        wind_drag=1.0,
        effectors=(),
        bounds=True,
        self_pieces=None,
        self_within=None,
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
        self.gravity = checked_array(gravity, [(3,)], "gravity")
        self.colliders = list(colliders)
        for col in self.colliders:
            if col.n_poses() not in (1, self.steps + 1):
                raise ValueError(f"a moving collider needs one pose per frame ({self.steps + 1}), got {col.n_poses()}")
        self.contact_stiffness = float(contact_stiffness)
        self.contact_thickness = float(contact_thickness)
        self.x0 = checked_array(cloth.rest if x0 is None else x0, [(n, 3)], "x0")
        self.v0 = checked_array(v0, [(), (3,), (n, 3)], "v0")
        self.forces = (
            None if forces is None else checked_array(forces, [(), (3,), (n, 3), (self.steps, n, 3)], "forces")
        )
        npin = len(cloth.pinned)
        self.pin_path = None if pin_path is None else checked_array(pin_path, [(self.steps + 1, npin, 3)], "pin_path")
        self.tol, self.max_newton = float(tol), int(max_newton)
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {', '.join(map(repr, SOLVERS))}, got {solver!r}")
        self.solver = solver
        if contact_smoothing is None:
            contact_smoothing = SOLVERS[solver]
        if not (np.isfinite(contact_smoothing) and contact_smoothing >= 0):
            raise ValueError(f"contact smoothing must be non-negative, got {contact_smoothing}")
        self.contact_smoothing = float(contact_smoothing)
        self._set_self_contact(self_distance, self_friction, self_pieces, self_within)
        if goals is not None and not isinstance(goals, Goals):
            raise ValueError("goals must be a core.Goals")
        self.goals = None if goals is None else goals.checked(self)
        self._set_wind(wind, wind_drag)
        if not all(isinstance(e, Effector) for e in effectors):
            raise ValueError("effectors must be core.Effector fields")
        self.effectors = [e.checked(self.steps + 1) for e in effectors]
        if bounds:
            check_bounds(self)

    def _set_self_contact(self, self_distance, self_friction, self_pieces, self_within):
        if not (np.isfinite(self_distance) and self_distance >= 0):
            raise ValueError(f"self distance must be non-negative (0: no self-collision), got {self_distance}")
        limit = max_self_distance(self.cloth)
        if self_distance > limit:
            raise ValueError(
                f"self distance {self_distance:g} m is more than this cloth allows ({limit:.4g} m, twice its "
                "shortest edge): lower it, or use a coarser mesh"
            )
        self.self_distance = float(self_distance)
        if not (np.isfinite(self_friction) and self_friction >= 0):
            raise ValueError(f"self friction must be non-negative, got {self_friction}")
        self.self_friction = float(self_friction)
        n = self.cloth.n
        self.self_pieces = None if self_pieces is None else np.asarray(self_pieces, dtype=np.int64)
        if self.self_pieces is not None and (self.self_pieces.shape != (n,) or self.self_pieces.min() < 0):
            raise ValueError(f"self_pieces must be one piece index ≥ 0 per vertex ({n})")
        self.self_within = None if self_within is None else np.asarray(self_within, dtype=bool)
        pieces = 1 if self.self_pieces is None else int(self.self_pieces.max()) + 1
        if self.self_within is not None and self.self_within.shape != (pieces,):
            raise ValueError(f"self_within must say for each of the {pieces} pieces whether it collides with itself")

    def crossing_kept_apart(self, x):
        """The pairs of triangles (K,2) crossing at positions x that self-collision keeps on their
        sides: every pair with it on, but only between pieces, or within a piece that collides
        with itself (self_within); none without it."""
        if self.self_distance == 0:
            return np.zeros((0, 2), np.int64)
        pairs = _crossing(
            np.ascontiguousarray(x, np.float64).tobytes(), np.asarray(self.cloth.tris, np.int64).tobytes()
        )
        if self.self_pieces is None or self.self_within is None:
            return pairs
        piece = self.self_pieces[self.cloth.tris[pairs, 0]]  # each triangle's piece
        return pairs[(piece[:, 0] != piece[:, 1]) | self.self_within[piece[:, 0]]]

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
        "goals",
        "wind",
        "wind_drag",
        "effectors",
        "self_pieces",
        "self_within",
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
        return Scene(**args, bounds=False)

    @functools.cached_property
    def hinges_bounded(self):
        """Whether a step's matrix bounds the hinges' Hessian by one that couples mesh edges only
        (half the band, a factorization 2.2× faster): linearized steps, where that holds the cloth
        from swinging by less than HINGE_DRAG_EXACT."""
        return self.solver == "linearized" and self.cloth.bending == "hinge" and hinge_drag(self) <= HINGE_DRAG_EXACT

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

    def _set_wind(self, wind, drag):
        self.wind = None if wind is None else checked_array(wind, [(3,), (self.steps + 1, 3)], "wind")
        if not (np.isfinite(drag) and drag >= 0):
            raise ValueError(f"the wind's drag must be non-negative, got {drag}")
        self.wind_drag = float(drag)

    def wind_at(self, s):
        """The wind (3,) during integrator step s → s+1: the frame's it steps toward, as Blender's
        effectors (frames.field_frame)."""
        return self.wind[field_frame(s, self.substeps)]

    def force_at(self, s):
        """Control force (n,3) acting during integrator step s → s+1, or None."""
        return None if self.forces is None else self.forces[s // self.substeps]
