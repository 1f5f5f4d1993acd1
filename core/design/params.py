"""Parameterizations: a small vector θ ↦ a scene's design, and design gradients pulled back to θ.

Each parameterization owns a slice of θ, writes the design fields it controls and may add a
regularizer on its θ. Control quantities are accelerations (m/s², force per unit vertex mass) so
that their scale and regularization mean the same at every mesh resolution.
"""

import numpy as np

from ..model import fields
from ..model.scene import BoundsError, check_bounds
from ..solver.integrator import SimulationError

# optimize's "auto" starts Gauss–Newton again from the keys (Acceleration.from_keys) for the
# vertices they take more than this far off the motion it started from
FROM_KEYS_OFF = 0.005
# the fit's ridge, relative to its Gram matrix's mean diagonal: nearly the least accelerations
# that meet the keys (they leave the keys' accelerations between them undetermined)
FROM_KEYS_RIDGE = 1e-6


# a factor of 4 either way: how far a design held as a log factor is scanned (Param.span)
LOG_SPAN = float(np.log(4.0))


class Param:
    name = "param"
    # design fields this parameterization sets outright (at most one may set each); every physical
    # one (core.model.fields.PHYSICAL) whose gradient its pullback reads is among them
    overwrites = ()
    # how far each entry of θ may be scanned either side where gradients stall (None: not scanned)
    span = None

    def __init__(self, bounds=None, cloths=None):
        self.user_bounds = bounds
        # in a scene of several cloths (core.Joined), the indices of those it varies (None: every one)
        self.cloths = None if cloths is None else sorted(set(int(c) for c in cloths))

    def cloth_masks(self, scene):
        """Per cloth with its own θ in a scene of several (Scene.self_pieces numbers them), every
        cloth or those of `cloths`, the mask of its vertices; [None] (all of them) for one cloth."""
        pieces = scene.self_pieces
        count = 1 if pieces is None else int(pieces.max()) + 1
        chosen = list(range(count)) if self.cloths is None else self.cloths
        if not chosen or max(chosen) >= count:
            raise ValueError(f"{self.name}: the scene has {count} cloth(s), not cloths {self.cloths}")
        return [None] if count == 1 else [pieces == c for c in chosen]

    def size(self, scene):
        return len(self.initial(scene))

    def bounds(self, scene):
        """L-BFGS-B bounds per entry of θ (None = unbounded); a start outside them is an error."""
        return self._bounds_for(self.initial(scene))

    def _bounds_for(self, theta0):
        if self.user_bounds is None:
            return [(None, None)] * len(theta0)
        lo, hi = (self.to_theta(b) if b is not None else None for b in self.user_bounds)
        if (lo is not None and (theta0 < lo - 1e-12).any()) or (hi is not None and (theta0 > hi + 1e-12).any()):
            raise ValueError(f"{self.name}: the start value lies outside the bounds {self.user_bounds}")
        return [(lo, hi)] * len(theta0)

    def to_theta(self, value):
        return float(value)

    def regularizer(self, theta, scene):
        return 0.0, np.zeros_like(theta)

    def regularizer_hess_vec(self, theta, dtheta, scene):
        """∇²R(θ)·δθ of the regularizer (Gauss–Newton uses it exactly)."""
        return np.zeros_like(dtheta)

    def jvp(self, theta, dtheta, design, tangent, scene):
        """Add the design direction of the θ-direction dtheta to `tangent` (fields as in the
        design, at `design` = the fields at θ): the forward counterpart of pullback. This
        default serves parameterizations linear in θ, whose direction is what apply makes of
        dtheta."""
        self.apply(dtheta, tangent, scene)

    def from_keys(self, theta, scene, loss, motion, lifted=True):
        """A start taken from the loss's keys instead of theta, or None (see Acceleration)."""
        return None

    def pushed(self, theta, scene, rng, spread):
        """theta with a random push for a restart (KeyedForces), or None where it has none."""
        return None


class GlobalStiffness(Param):
    """One stiffness for the cloth's in-plane springs and/or all bending elements (hinges or
    bending springs, as the cloth's model has them), θ = log k̄ of their mean k̄ (the tension
    springs' mean for the in-plane ones): the scene's springs scaled together, so a fabric's
    springs (core.model.material, which vary with the triangles) keep their proportions, its
    compression and shear their ratio to its stretch, and a uniform cloth gets k = exp(θ).
    A scene of several cloths (core.Joined; Scene.self_pieces numbers them) has one θ per kind
    and cloth, of every cloth or of `cloths` only (their indices; the others keep theirs)."""

    name = "stiffness"
    span = LOG_SPAN

    def __init__(self, tension=True, bending=False, bounds=None, cloths=None):
        super().__init__(bounds, cloths)
        if not (tension or bending):
            raise ValueError("GlobalStiffness needs tension and/or bending")
        self.kinds = [k for k, on in (("k_tension", tension), ("k_bending", bending)) if on]
        self.overwrites = tuple(self.kinds) + (("k_compression", "k_shear") if tension else ())

    def _groups(self, scene):
        """Per cloth with its own θ: per field, the mask of its springs (None: all of them)."""
        masks = self.cloth_masks(scene)
        return [None if m is None else (lambda field, m=m: m[scene.cloth.first_vertices(field)]) for m in masks]

    def _shapes(self, scene):
        """Per θ (kind, then cloth): the kind's mean there and {field: (its mask, its springs
        relative to that mean)} of the fields the θ scales."""
        cloth = scene.cloth
        out = []
        for kind in self.kinds:
            fields = [kind]
            if kind == "k_tension":
                fields += ["k_compression"] if cloth.own_compression is not None else []
                fields += ["k_shear"] if cloth.n_shear else []
            for group in self._groups(scene):
                masks = {f: (slice(None) if group is None else group(f)) for f in fields}
                own = getattr(cloth, kind)[masks[kind]]
                if not own.size:
                    raise ValueError(f"stiffness: a cloth of the scene has no {kind} elements to scale")
                mean = own.mean()
                out.append((mean, {f: (mask, getattr(cloth, f)[mask] / mean) for f, mask in masks.items()}))
        return out

    def initial(self, scene):
        return np.log([mean for mean, _ in self._shapes(scene)])

    def to_theta(self, value):
        return float(np.log(value))

    def apply(self, theta, design, scene):
        for t, (_, shapes) in zip(theta, self._shapes(scene)):
            for f, (mask, shape) in shapes.items():
                design[f] = np.array(design[f], dtype=np.float64)
                design[f][mask] = shape * np.exp(t)

    def pullback(self, theta, grad, design, scene):
        return np.array(
            [
                sum(np.dot(getattr(grad, f)[mask], shape) for f, (mask, shape) in shapes.items()) * np.exp(t)
                for t, (_, shapes) in zip(theta, self._shapes(scene))
            ]
        )

    def jvp(self, theta, dtheta, design, tangent, scene):
        for t, dt, (_, shapes) in zip(theta, dtheta, self._shapes(scene)):
            for f, (mask, shape) in shapes.items():
                tangent[f] = np.array(tangent[f], dtype=np.float64)
                tangent[f][mask] += shape * np.exp(t) * dt

    def describe(self, theta):
        """{kind: its stiffness}, a list of one per cloth where several have their own."""
        values = np.exp(np.asarray(theta)).reshape(len(self.kinds), -1)
        return {k: (float(v[0]) if len(v) == 1 else [float(x) for x in v]) for k, v in zip(self.kinds, values)}


class Friction(Param):
    """The friction coefficient μ of colliders: of the one at `collider` (its index in
    Scene.colliders), or of all of them together (None: one μ for every collider with friction).
    θ = μ, bounded below by 0."""

    name = "friction"
    overwrites = ("friction",)

    def __init__(self, collider=None, bounds=(0.0, None)):
        super().__init__(bounds)
        self.collider = collider

    def _which(self, scene):
        if self.collider is None:
            which = [i for i, c in enumerate(scene.colliders) if c.friction > 0] or list(range(len(scene.colliders)))
        elif not 0 <= self.collider < len(scene.colliders):
            raise ValueError(f"friction: the scene has {len(scene.colliders)} colliders, no collider {self.collider}")
        else:
            which = [self.collider]
        if not which:
            raise ValueError("friction: the scene has no colliders")
        return which

    def initial(self, scene):
        return np.array([np.mean([scene.colliders[i].friction for i in self._which(scene)])])

    def apply(self, theta, design, scene):
        design["friction"] = design["friction"].copy()
        design["friction"][self._which(scene)] = theta[0]

    def pullback(self, theta, grad, design, scene):
        return np.array([float(np.sum(grad.friction[self._which(scene)]))])

    def describe(self, theta):
        return {"friction": float(theta[0])}


class LogFactor(Param):
    """One factor a = exp(θ) on design fields' values in the scene (`bases`: per field it
    overwrites, its value there): their pattern kept, their size optimized. Subclasses name the
    fields and say what their bases are."""

    span = LOG_SPAN

    def bases(self, scene):
        """{field: its value in the scene} for every field in overwrites (ValueError without one)."""
        raise NotImplementedError

    def initial(self, scene):
        self.bases(scene)  # refuses a scene without one
        return np.zeros(1)

    def to_theta(self, value):
        return float(np.log(value))

    def apply(self, theta, design, scene):
        for field, base in self.bases(scene).items():
            design[field] = np.exp(theta[0]) * base

    def pullback(self, theta, grad, design, scene):
        total = sum(float(np.sum(getattr(grad, f) * base)) for f, base in self.bases(scene).items())
        return np.array([np.exp(theta[0]) * total])

    def jvp(self, theta, dtheta, design, tangent, scene):
        for field, base in self.bases(scene).items():
            tangent[field] = tangent[field] + dtheta[0] * np.exp(theta[0]) * base

    def describe(self, theta):
        return {self.name: float(np.exp(theta[0]))}


class FrictionScale(LogFactor):
    """The friction coefficients μ of every collider with friction scaled by one factor a = exp(θ):
    how much the cloth slides on all of them, their proportions kept (the add-on's Friction)."""

    name = "friction_scale"
    overwrites = ("friction",)

    def bases(self, scene):
        mu = np.array([c.friction for c in scene.colliders], dtype=float)
        if not (mu > 0).any():
            raise ValueError(f"{self.name}: no collider has friction to scale")
        return {"friction": mu}


class SelfFriction(Param):
    """The friction coefficient μ between the cloth's layers (Scene.self_friction). θ = μ,
    bounded below by 0."""

    name = "self_friction"
    overwrites = ("self_friction",)

    def __init__(self, bounds=(0.0, None)):
        super().__init__(bounds)

    def initial(self, scene):
        if scene.self_distance == 0:
            raise ValueError("self_friction: the scene has no self-collision (self_distance is 0)")
        return np.array([scene.self_friction])

    def apply(self, theta, design, scene):
        design["self_friction"] = theta[0]

    def pullback(self, theta, grad, design, scene):
        return np.array([float(grad.self_friction)])

    def describe(self, theta):
        return {"self_friction": float(theta[0])}


class SpringStiffness(Param):
    """One stiffness per element of a kind: "tension" (per tension spring) or "bending" (per hinge
    or bending spring): θ = log k, or θ = k with log=False. The linear scale moves every spring by
    comparable absolute amounts, so the weak bending springs can grow as fast as the tension
    springs and take over their role (the thesis's per-spring experiment relies on this); its
    lower bound stays positive (K_MIN at least)."""

    name = "spring_stiffness"
    K_MIN = 1e-6

    def __init__(self, kind="tension", log=True, bounds=None):
        super().__init__(bounds)
        if kind not in ("tension", "bending"):
            raise ValueError(f"SpringStiffness kind must be 'tension' or 'bending', got {kind!r}")
        self.field = "k_" + kind
        self.overwrites = (self.field,)
        self.log = bool(log)

    def initial(self, scene):
        k = getattr(scene.cloth, self.field)
        return np.log(k) if self.log else k.astype(np.float64)

    def bounds(self, scene):
        bounds = super().bounds(scene)
        if self.log:
            return bounds
        return [(self.K_MIN if lo is None else max(lo, self.K_MIN), hi) for lo, hi in bounds]

    def to_theta(self, value):
        return float(np.log(value)) if self.log else float(value)

    def apply(self, theta, design, scene):
        design[self.field] = np.exp(theta) if self.log else theta.copy()

    def pullback(self, theta, grad, design, scene):
        g = getattr(grad, self.field)
        return g * np.exp(theta) if self.log else g.copy()

    def jvp(self, theta, dtheta, design, tangent, scene):
        tangent[self.field] = tangent[self.field] + (np.exp(theta) * dtheta if self.log else dtheta)

    def describe(self, theta):
        return {self.field: np.exp(theta) if self.log else theta.copy()}


class InitialVelocity(Param):
    """Initial velocity (m/s): one vector for the whole cloth, or one per vertex; in a scene of
    several cloths (core.Joined), each cloth's own, of every cloth or of `cloths` only (their
    indices; the others keep theirs).

    Per vertex, θ holds the mean velocity and each vertex's deviation from it: the mean receives
    the summed gradient of all vertices, so L-BFGS first moves the cloth as a whole (aiming a
    throw) and then shapes it. Plain per-vertex θ stalls on the thesis throw experiment (816×
    loss reduction vs 3.8e4×). Bounds limit the mean velocity."""

    name = "initial_velocity"
    overwrites = ("v0",)

    def __init__(self, per_vertex=False, bounds=None, cloths=None):
        super().__init__(bounds, cloths)
        self.per_vertex = per_vertex
        self._slices = None

    def _parts(self, scene):
        """Per cloth with its own θ: its vertices and its slice of θ."""
        out, at = [], 0
        for mask in self.cloth_masks(scene):
            vertices = np.arange(scene.cloth.n) if mask is None else np.flatnonzero(mask)
            size = 3 + (3 * len(vertices) if self.per_vertex else 0)
            out.append((vertices, slice(at, at + size)))
            at += size
        self._slices = [sl for _, sl in out]  # describe's, which has no scene
        return out

    def initial(self, scene):
        v0 = np.broadcast_to(scene.v0, scene.x0.shape)
        parts = []
        for vertices, _ in self._parts(scene):
            mean = v0[vertices].mean(axis=0)
            parts += [mean, (v0[vertices] - mean).ravel()] if self.per_vertex else [mean]
        return np.concatenate(parts)

    def bounds(self, scene):
        out = [(None, None)] * self.size(scene)
        theta0 = self.initial(scene)
        for _, sl in self._parts(scene):
            out[sl.start : sl.start + 3] = self._bounds_for(theta0[sl.start : sl.start + 3])
        return out

    def apply(self, theta, design, scene):
        v0 = np.array(np.broadcast_to(design["v0"], scene.x0.shape), dtype=np.float64)
        for vertices, sl in self._parts(scene):
            own = theta[sl]
            v0[vertices] = own[:3] + own[3:].reshape(-1, 3) if self.per_vertex else own
        design["v0"] = v0

    def pullback(self, theta, grad, design, scene):
        g = np.broadcast_to(grad.v0, scene.x0.shape)
        parts = []
        for vertices, _ in self._parts(scene):
            parts += [g[vertices].sum(axis=0), g[vertices].ravel()] if self.per_vertex else [g[vertices].sum(axis=0)]
        return np.concatenate(parts)

    def jvp(self, theta, dtheta, design, tangent, scene):
        v0 = np.zeros(scene.x0.shape)
        for vertices, sl in self._parts(scene):
            own = dtheta[sl]
            v0[vertices] = own[:3] + own[3:].reshape(-1, 3) if self.per_vertex else own
        tangent["v0"] = tangent["v0"] + v0

    def describe(self, theta):
        """{"v0": the velocity, or one per cloth, or every vertex's (the cloths' in turn)}."""
        if not self.per_vertex:
            return {"v0": theta.copy() if len(theta) == 3 else theta.reshape(-1, 3)}
        slices = self._slices or [slice(0, len(theta))]
        return {"v0": np.concatenate([theta[sl][:3] + theta[sl][3:].reshape(-1, 3) for sl in slices])}


class InitialRotation(Param):
    """Rigid rotation of the initial cloth by θ radians about the axis through p0 → p1."""

    name = "rotation"
    overwrites = ("x0",)  # its pullback assumes no other rotation follows

    def __init__(self, p0, p1, start=0.0, bounds=None):
        super().__init__(bounds)
        self.p0 = np.asarray(p0, dtype=np.float64)
        axis = np.asarray(p1, dtype=np.float64) - self.p0
        if self.p0.shape != (3,) or axis.shape != (3,) or np.linalg.norm(axis) < 1e-12:
            raise ValueError("InitialRotation needs two distinct 3D points p0, p1 on the axis")
        self.axis = axis / np.linalg.norm(axis)
        self.start = float(start)

    def initial(self, scene):
        return np.array([self.start])

    def _rotate(self, r, angle):
        a = self.axis
        return (
            r * np.cos(angle) + np.cross(a, r) * np.sin(angle) + np.outer(r @ a, a) * (1 - np.cos(angle))
        )  # Rodrigues

    def apply(self, theta, design, scene):
        design["x0"] = self.p0 + self._rotate(design["x0"] - self.p0, theta[0])

    def pullback(self, theta, grad, design, scene):
        # d/dθ R(θ)r = a × R(θ)r, evaluated on the rotated positions
        return np.array([np.sum(grad.x0 * np.cross(self.axis, design["x0"] - self.p0))])

    def jvp(self, theta, dtheta, design, tangent, scene):
        tangent["x0"] = tangent["x0"] + dtheta[0] * np.cross(self.axis, design["x0"] - self.p0)

    def describe(self, theta):
        return {"rotation_deg": float(np.degrees(theta[0]))}


class Acceleration(Param):
    """Per-frame control accelerations with magnitude and temporal-smoothness regularizers.

    Every vertex pays for its own acceleration, as every vertex counts in a keyframe loss
    (Σ over vertices): the balance between matching the keys and pushing the cloth, and so the
    optimum, is the same at any mesh resolution. weight_for_distance() turns the artist's
    "costs as much as being this far off a key" into a weight."""

    def __init__(self, magnitude=0.0, smoothness=0.0, bounds=None, cloths=None):
        super().__init__(bounds, cloths)
        if magnitude < 0 or smoothness < 0:
            raise ValueError(f"{self.name}: regularizer weights must be non-negative")
        self.magnitude, self.smoothness = float(magnitude), float(smoothness)

    def _pushed(self, accel, scene):
        """Per-vertex accelerations (frames or keys, n, 3) on the cloths pushed: every vertex, or of
        a joined scene (core.Joined) those of `cloths` only (the others' entries of θ stay idle)."""
        if self.cloths is None:
            return accel
        masks = self.cloth_masks(scene)
        if masks[0] is None:
            return accel
        return accel * np.logical_or.reduce(masks)[None, :, None]

    def regularizer(self, theta, scene):
        a = self._shape(theta, scene)
        scale = 1.0 if a.ndim == 3 else float(scene.cloth.n)  # a uniform acceleration moves every vertex
        value = self.magnitude * scale * float(np.sum(a * a))
        grad = 2 * self.magnitude * scale * a
        if len(a) > 1 and self.smoothness:
            da = np.diff(a, axis=0)
            value += self.smoothness * scale * float(np.sum(da * da))
            g = 2 * self.smoothness * scale * da
            grad[1:] += g
            grad[:-1] -= g
        return value, grad.ravel()

    def regularizer_hess_vec(self, theta, dtheta, scene):
        # a quadratic form without linear part: ∇R(δθ) = ∇²R·δθ
        return self.regularizer(dtheta, scene)[1]

    def _basis(self, scene):
        """(frames, θ's entries per vertex and axis): each frame's acceleration from θ's, or None
        where θ is not per vertex."""
        return None

    @staticmethod
    def _flight(scene, damping):
        """Implicit Euler's free flight under air damping c (1/s), substep by substep (v ← (v +
        h·a)/(1 + h·c), x ← x + h·v, a frame's acceleration held over its substeps): (frames+1,
        frames) D and (frames+1,) w with x_f = x0 + w_f·v0 + Σ_j D_fj·a_j. Cotton's c = 1 carries a
        push only half as far over two seconds as the undamped flight."""
        h, sub = scene.h, scene.substeps
        keep = 1.0 / (1.0 + h * damping)
        velocity = np.zeros(scene.steps + 1)  # per unit a_j (j < frames), then per unit v0
        velocity[-1] = 1.0
        position = np.zeros_like(velocity)
        out = np.zeros((scene.steps + 1, scene.steps + 1))
        for s in range(scene.n_steps):
            velocity *= keep
            velocity[s // sub] += h * keep
            position += h * velocity
            out[(s + 1) // sub] = position
        return out[:, :-1], out[:, -1]

    @staticmethod
    def _integration(scene):
        """(frames+1, frames) D with offset_f = Σ_j D_fj·a_j: from rest, p_{f+1} − 2p_f + p_{f−1}
        = dt²·a_f, i.e. D_fj = dt²·(f − j) for j < f."""
        f = np.arange(scene.steps + 1)[:, None] - np.arange(scene.steps)[None, :]
        return scene.dt**2 * np.maximum(f, 0).astype(np.float64)

    def from_keys(self, theta, scene, loss, motion, lifted=True):
        """theta with the vertices the position keys take more than FROM_KEYS_OFF off `motion`
        (frames+1, n, 3: the cloth's motion at theta) given the accelerations that would carry
        them there in a flight damped by the cloth's air (least squares, nearly the least beyond
        holding them up that meet the keys): lifted, from the start held up against gravity (a
        force that lifts them takes friction's hold with their weight) — what held them in that
        motion, a floor under a corner to be lifted, does not where the keys take them, and the
        linearization of resting contact gives no hint of the way up; else theta's corrected by
        the flight from motion to the keys (a design that already lifts them). The pins and the
        other vertices keep theta. None where nothing is far off, or θ or the loss has nothing
        per vertex."""
        basis, targets = self._basis(scene), getattr(loss, "targets", None) or {}
        frames = sorted(f for f in targets if 0 < f <= scene.steps)
        if basis is None or not frames:
            return None
        keys = np.stack([targets[f] for f in frames])
        if keys.shape[1] != scene.cloth.n:  # keys on another mesh (an embedded render mesh)
            return None
        off = np.linalg.norm(keys - motion[frames], axis=2) > FROM_KEYS_OFF
        weights = getattr(loss, "vertex_weights", None)
        for row, frame in zip(off, frames):  # a vertex the loss does not weigh at a key is not off it
            weight = weights.get(frame) if isinstance(weights, dict) else weights
            if weight is not None:
                row &= np.asarray(weight) > 0
        far = off.any(axis=0)
        far[scene.cloth.pinned] = False
        if not far.any():
            return None
        out = self._shape(theta.copy(), scene)
        damping = np.broadcast_to(scene.cloth.damping, (scene.cloth.n,))
        hover = np.linalg.lstsq(basis, np.ones(len(basis)), rcond=None)[0]  # θ per unit acceleration held
        for c in np.unique(damping[far]):  # one flight per air damping (a joined scene may have several)
            group = far & (damping == c)
            drop, carry = self._flight(scene, c)
            drop, carry = drop[frames], carry[frames]
            fit = drop @ basis
            gram = fit.T @ fit
            gram += FROM_KEYS_RIDGE * np.trace(gram) / len(gram) * np.eye(len(gram))
            if lifted:  # from the start held up against gravity (hovering), theta's own accelerations dropped
                out[:, group] = -hover[:, None, None] * scene.gravity
                v0 = np.broadcast_to(scene.v0, scene.x0.shape)[None, group]
                fall = (drop.sum(axis=1) - fit @ hover)[:, None, None] * scene.gravity  # ~0: it hovers
                flight = scene.x0[None, group] + carry[:, None, None] * v0 + fall
            else:
                flight = motion[frames][:, group]
            out[:, group] += np.einsum("kl,ml,mni->kni", np.linalg.inv(gram), fit, keys[:, group] - flight)
        return out.ravel()


class ControlForces(Acceleration):
    """A control acceleration per frame and vertex (force = vertex mass × θ)."""

    name = "forces"

    def _shape(self, theta, scene):
        return theta.reshape(scene.steps, scene.cloth.n, 3)

    def _basis(self, scene):
        return np.eye(scene.steps)

    def initial(self, scene):
        return np.zeros(scene.steps * scene.cloth.n * 3)

    def apply(self, theta, design, scene):
        design["forces"] = design["forces"] + scene.cloth.masses[:, None] * self._pushed(
            self._shape(theta, scene), scene
        )

    def pullback(self, theta, grad, design, scene):
        return self._pushed(grad.forces * scene.cloth.masses[:, None], scene).ravel()

    def describe(self, theta):
        return {"control_acceleration": theta.copy()}


class Wind(Acceleration):
    """A uniform acceleration per frame acting on every vertex (force = vertex mass × θ_f)."""

    name = "wind"

    def _shape(self, theta, scene):
        return theta.reshape(scene.steps, 3)

    def initial(self, scene):
        return np.zeros(scene.steps * 3)

    def apply(self, theta, design, scene):
        design["forces"] = design["forces"] + scene.cloth.masses[None, :, None] * self._shape(theta, scene)[:, None, :]

    def pullback(self, theta, grad, design, scene):
        return np.einsum("fni,n->fi", grad.forces, scene.cloth.masses).ravel()

    def describe(self, theta):
        return {"wind_acceleration": theta.reshape(-1, 3).copy()}


class WindStrength(LogFactor):
    """How much the cloth feels the scene's wind (Scene(wind=...), its Wind fields): one factor
    a = exp(θ) on the wind and on its drag alike, w − κ·v → a·(w − κ·v), as Blender's Field
    Weights › Wind scales both; its gusts and direction kept."""

    name = "wind_strength"
    overwrites = ("wind", "wind_drag")

    def bases(self, scene):
        if scene.wind is None:
            raise ValueError(f"{self.name}: the scene has no wind to scale")
        return {"wind": scene.wind, "wind_drag": scene.wind_drag}


class KeyedForces(Acceleration):
    """Control accelerations at keys `every` seconds apart (the first at the start, the last at the
    end, evenly spread), linearly interpolated to every frame's midpoint (force = vertex mass ×
    acceleration). θ: (keys, n, 3) in m/s². A few keys per second steer the cloth with a
    hundredth of the per-frame unknowns, and the motion they give is smooth by construction.
    The regularizers integrate over time and add up over the vertices, magnitude·Σᵢ∫‖aᵢ‖²dt and
    smoothness·Σᵢ∫‖ȧᵢ‖²dt, like the keyframe loss's Σ over vertices, so their weights mean the
    same at any frame rate, key spacing and mesh resolution: magnitude = (d/g)²/s makes a vertex
    pushed at 1 g for a second cost as much as being d off a key (weight_for_distance).

    No force moves a pinned vertex, so a key that poses the pins elsewhere (a copy turned or moved
    as a whole) is out of reach of forces alone. move_pins (True for every pinned vertex, or the
    vertex indices of some) lets the control move those pins as the hand holding them would: a
    pin's acceleration key is double-integrated (from rest, step by step as the cloth's implicit
    Euler) into an offset added to its path, so pins and cloth take the same smooth, regularized
    accelerations, and max_control_acceleration counts the pins' (kept in the forces, where no
    force acts on a pin)."""

    name = "keyed_forces"

    def __init__(self, every=0.25, magnitude=0.0, smoothness=0.0, bounds=None, move_pins=False, cloths=None):
        super().__init__(magnitude, smoothness, bounds, cloths)
        if not (np.isfinite(every) and every > 0):
            raise ValueError(f"{self.name}: the key spacing must be positive seconds, got {every}")
        self.every = float(every)
        self.move_pins = move_pins
        if move_pins is not False:
            self.overwrites = ("pin_path",)

    def moving(self, scene):
        """Positions in cloth.pinned of the pins the control moves (may be empty)."""
        pinned = scene.cloth.pinned
        if self.move_pins is True:
            return np.arange(len(pinned))
        if self.move_pins is False:
            return np.zeros(0, np.int64)
        want = np.unique(np.asarray(self.move_pins, dtype=np.int64).ravel())
        stray = np.setdiff1d(want, pinned)
        if len(stray):
            raise ValueError(f"{self.name}: move_pins names vertices that are not pinned: {stray[:5].tolist()}")
        return np.flatnonzero(np.isin(pinned, want))

    def _basis(self, scene):
        return self.weights(scene)

    def key_times(self, scene):
        duration = scene.steps * scene.dt
        count = int(np.ceil(duration / self.every * (1 - 1e-9))) + 1
        if count > scene.steps:
            raise ValueError(
                f"{self.name}: keys every {self.every:g} s give {count} keys for {scene.steps} frames; "
                f"space them at least {duration / (scene.steps - 1) if scene.steps > 1 else duration:g} s "
                "apart"
                if scene.steps > 1
                else f"{self.name}: one frame leaves nothing to key"
            )
        return np.linspace(0.0, duration, count)

    def weights(self, scene):
        """(frames, keys): each frame's acceleration from the keys around its midpoint."""
        times = self.key_times(scene)
        mid = (np.arange(scene.steps) + 0.5) * scene.dt
        j = np.clip(np.searchsorted(times, mid, side="right") - 1, 0, len(times) - 2)
        w = (mid - times[j]) / (times[j + 1] - times[j])
        out = np.zeros((scene.steps, len(times)))
        out[np.arange(scene.steps), j] = 1 - w
        out[np.arange(scene.steps), j + 1] = w
        return out

    def _shape(self, theta, scene):
        return theta.reshape(-1, scene.cloth.n, 3)

    def initial(self, scene):
        self.moving(scene)  # names stray move_pins before any run
        return np.zeros(len(self.key_times(scene)) * scene.cloth.n * 3)

    def pushed(self, theta, scene, rng, spread):
        """theta plus, at every key, one acceleration drawn from N(0, spread²) per axis (m/s²) for
        all of its cloths' vertices alike: the cloth shoved as a whole, another motion to start
        from rather than noise its regularizer would take straight out."""
        push = rng.normal(0.0, spread, (len(self.key_times(scene)), 1, 3))
        out = self._shape(theta.copy(), scene)
        out += self._pushed(np.broadcast_to(push, out.shape), scene)
        return out.ravel()

    def _pin_offsets(self, accel, scene, moving):
        """(frames+1, len(moving), 3) offsets of the moving pins' paths from their accelerations."""
        return np.einsum("fj,jpi->fpi", self._integration(scene), accel[:, scene.cloth.pinned[moving]])

    def apply(self, theta, design, scene):
        accel = np.einsum("fk,kni->fni", self.weights(scene), self._pushed(self._shape(theta, scene), scene))
        design["forces"] = design["forces"] + scene.cloth.masses[:, None] * accel
        moving = self.moving(scene)
        if len(moving):
            # without a path the pins sit at the scene's x0 (not a rotated one)
            design["pin_path"] = (scene.pin_frames if design.get("pin_path") is None else design["pin_path"]).copy()
            design["pin_path"][:, moving] += self._pin_offsets(accel, scene, moving)

    def pullback(self, theta, grad, design, scene):
        per_frame = grad.forces * scene.cloth.masses[:, None]
        moving = self.moving(scene)
        if len(moving):
            per_frame[:, scene.cloth.pinned[moving]] += np.einsum(
                "fj,fpi->jpi", self._integration(scene), grad.pin_path[:, moving]
            )
        return np.einsum("fk,fni->kni", self.weights(scene), self._pushed(per_frame, scene)).ravel()

    def jvp(self, theta, dtheta, design, tangent, scene):
        accel = np.einsum("fk,kni->fni", self.weights(scene), self._pushed(self._shape(dtheta, scene), scene))
        tangent["forces"] = tangent["forces"] + scene.cloth.masses[:, None] * accel
        moving = self.moving(scene)
        if len(moving):
            tangent["pin_path"] = tangent["pin_path"].copy()
            tangent["pin_path"][:, moving] += self._pin_offsets(accel, scene, moving)

    def regularizer(self, theta, scene):
        a = self._shape(theta, scene)
        times = self.key_times(scene)
        gaps = np.diff(times)
        span = np.r_[gaps, 0.0] / 2 + np.r_[0.0, gaps] / 2  # trapezoid: ∫‖a‖² over piecewise-linear a
        value = self.magnitude * float(np.einsum("k,kni,kni->", span, a, a))
        grad = 2 * self.magnitude * span[:, None, None] * a
        da = np.diff(a, axis=0) / gaps[:, None, None]  # ȧ on each interval
        value += self.smoothness * float(np.einsum("k,kni,kni->", gaps, da, da))
        g = 2 * self.smoothness * da
        grad[1:] += g
        grad[:-1] -= g
        return value, grad.ravel()

    def describe(self, theta):
        return {"control_acceleration_keys": theta.reshape(-1, 3).copy()}


def pins_off_targets(scene, loss):
    """{frame: (n_pinned,) distances} of each position target's pinned vertices from where the
    scene holds the pins at that frame: a copy moved or turned as a whole poses them elsewhere."""
    pinned = scene.cloth.pinned
    return {
        f: np.linalg.norm(target[pinned] - scene.pins_at(f * scene.substeps), axis=1)
        for f, target in sorted(loss.targets.items())
    }


def posed_pins(scene, loss, slack=1e-3):
    """The pinned vertices some target poses more than `slack` (m) from their pins: what
    KeyedForces(move_pins=...) must move for those keys to be reachable."""
    off = pins_off_targets(scene, loss)
    if not off or not len(scene.cloth.pinned):
        return np.zeros(0, np.int64)
    return scene.cloth.pinned[np.max(list(off.values()), axis=0) > slack]


def weight_for_distance(distance, g=9.81):
    """The regularizer weight ((m/s²)²·s per m²) at which 1 g held for 1 s on a vertex (or, for
    smoothness, 1 g/s of change over 1 s) costs as much as that vertex being `distance` metres
    off a key: how an artist states how much control force a key is worth."""
    return (distance / g) ** 2


_BY_NAME = {
    "k_tension": lambda **kw: GlobalStiffness(tension=True, bending=False, **kw),
    "k_bending": lambda **kw: GlobalStiffness(tension=False, bending=True, **kw),
    "stiffness": lambda **kw: GlobalStiffness(tension=True, bending=True, **kw),
    "spring_stiffness": lambda **kw: SpringStiffness("tension", **kw),
    "bending_spring_stiffness": lambda **kw: SpringStiffness("bending", **kw),
    "v0": lambda **kw: InitialVelocity(per_vertex=False, **kw),
    "v0_per_vertex": lambda **kw: InitialVelocity(per_vertex=True, **kw),
    "rotation": InitialRotation,
    "forces": ControlForces,
    "keyed_forces": KeyedForces,
    "wind": Wind,
    "wind_strength": WindStrength,
    "friction": Friction,
    "friction_scale": FrictionScale,
    "self_friction": SelfFriction,
}


def make_param(name, **kwargs):
    """A parameterization by name: one of PARAM_NAMES."""
    if name not in _BY_NAME:
        raise ValueError(f"unknown parameter {name!r}; choose from {', '.join(sorted(_BY_NAME))}")
    return _BY_NAME[name](**kwargs)


PARAM_NAMES = tuple(sorted(_BY_NAME))


def _within(scene):
    try:
        check_bounds(scene)
    except BoundsError:
        return False
    return True


class Design:
    """Maps the concatenated θ of several parameterizations to scenes and gradients."""

    def __init__(self, scene, params):
        self.base = scene
        self.params = [make_param(p) if isinstance(p, str) else p for p in params]
        if not self.params:
            raise ValueError("nothing to optimize: give at least one parameter")
        for p in self.params:
            if not isinstance(p, Param):
                raise ValueError(f"not a parameterization: {p!r}")
        for field in sorted({f for p in self.params for f in p.overwrites}):
            owners = [p.name for p in self.params if field in p.overwrites]
            if len(owners) > 1:
                raise ValueError(f"{field} is set by more than one parameter ({', '.join(owners)}); keep one")
        starts = [p.initial(scene) for p in self.params]
        self.slices, at = [], 0
        for s in starts:
            self.slices.append(slice(at, at + len(s)))
            at += len(s)
        self.theta0 = np.concatenate(starts)
        self.bounds = [b for p in self.params for b in p.bounds(scene)]
        self.spans = [p.span for p, s in zip(self.params, starts) for _ in s]
        # a design whose stiffness leaves what the solver simulates right (check_bounds), from a
        # start within it, is a failed trial: what Simulate & Bake would refuse is never the result
        self._guard = any(f.startswith("k_") for p in self.params for f in p.overwrites) and _within(scene)

    @property
    def physical(self):
        """The physical design fields the parameterizations set: the gradients pullback reads."""
        return tuple(f for f in fields.PHYSICAL if any(f in p.overwrites for p in self.params))

    def fields(self, theta):
        sc = self.base
        design = fields.read(sc)
        for p, sl in zip(self.params, self.slices):
            p.apply(theta[sl], design, sc)
        return design

    def scene(self, theta, design=None):
        d = self.fields(theta) if design is None else design
        cloth = self.base.cloth.replace(**{name: d[name] for name in fields.CLOTH})
        forces = None if self.base.forces is None and not np.any(d["forces"]) else d["forces"]
        colliders = [
            c if c.friction == mu else c.replace(friction=max(float(mu), 0.0))
            for c, mu in zip(self.base.colliders, d["friction"])
        ]
        out = self.base.replace(
            cloth=cloth,
            x0=d["x0"],
            v0=d["v0"],
            forces=forces,
            pin_path=d["pin_path"],
            colliders=colliders,
            self_friction=max(float(d["self_friction"]), 0.0),
            wind=d["wind"],
            wind_drag=max(float(d["wind_drag"]), 0.0),
        )
        if self._guard and not _within(out):
            raise SimulationError("the design's stiffness is beyond what the solver simulates right", 0, 0)
        return out

    def pullback(self, theta, grad, design):
        return np.concatenate(
            [p.pullback(theta[sl], grad, design, self.base) for p, sl in zip(self.params, self.slices)]
        )

    def regularizer(self, theta):
        value, grads = 0.0, []
        for p, sl in zip(self.params, self.slices):
            v, g = p.regularizer(theta[sl], self.base)
            value += v
            grads.append(g)
        return value, np.concatenate(grads)

    def regularizer_hess_vec(self, theta, dtheta):
        return np.concatenate(
            [p.regularizer_hess_vec(theta[sl], dtheta[sl], self.base) for p, sl in zip(self.params, self.slices)]
        )

    def jvp(self, theta, dtheta, design):
        """The design direction (fields as in `fields`, all present) of the θ-direction dtheta at
        θ, whose fields are `design`."""
        tangent = {k: np.zeros(np.shape(v)) for k, v in design.items() if v is not None}
        for p, sl in zip(self.params, self.slices):
            p.jvp(theta[sl], dtheta[sl], design, tangent, self.base)
        return tangent

    def _first(self, theta, start):
        """theta with the slice of the first parameterization p for which start(p, its slice) is
        not None set to that, or None if there is none."""
        for p, sl in zip(self.params, self.slices):
            value = start(p, theta[sl])
            if value is not None:
                out = theta.copy()
                out[sl] = value
                return out
        return None

    def pushed(self, theta, rng, spread):
        """theta with the first parameterization that can be pushed for a restart pushed
        (Param.pushed), or None if none can."""
        return self._first(theta, lambda p, t: p.pushed(t, self.base, rng, spread))

    def from_keys(self, loss, motion, theta=None):
        """θ0 with the first parameterization that has a start from the loss's keys given it
        (Param.from_keys, lifted; motion: the cloth's at θ0; a second would push the same way
        again), or, given theta (whose motion it is), theta corrected toward the keys; None if
        none has."""
        lifted = theta is None
        theta = self.theta0 if theta is None else theta
        return self._first(theta, lambda p, t: p.from_keys(t, self.base, loss, motion, lifted))

    def describe(self, theta):
        out = {}
        for p, sl in zip(self.params, self.slices):
            out.update(p.describe(theta[sl]))
        return out
