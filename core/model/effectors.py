"""Blender's force fields (effectors) as its Cloth feels them at each vertex (BKE_effectors_apply,
do_physical_effector, effector_falloff), in DiffCloth's units.

Blender's cloth asks every field for a vector at each vertex, from the vertex's position and
velocity at the step's start, and splits it by the field's Wind Factor: that share presses the
cloth's triangles along their normals as wind does, the rest pushes them whole
(SIM_mass_spring_force_face_extern: 0.02·A/12·(Σ + own) per corner, as the wind shares its
pressure). Both are velocities in Blender's time unit; times √1000 they are m/s, and DiffCloth's
core.model.pressure presses with 0.02·√1000 (its PRESSURE), so a field of strength S acts
as S·√1000/fps m/s (docs/api.md). Fields: Wind, Force, Vortex and Drag, each with its shape (Point,
Line, Plane), falloff (Sphere, Tube, Cone, with power and min/max distances), Z direction, Flow
and the cloth's Field Weights (All × the field's type). Strength, place and axis per frame.

The vectors' derivatives by each vertex's position and velocity are exact (complex-step: every
operation below is analytic in x and v, branches read real parts), for the adjoint and tangent.
"""

import copy

import numpy as np

from .frames import field_frame, per_frame

KINDS = ("WIND", "FORCE", "VORTEX", "DRAG", "TURBULENCE")
SHAPES = ("POINT", "LINE", "PLANE")
FALLOFFS = ("SPHERE", "TUBE", "CONE")
Z_DIRECTIONS = ("BOTH", "POSITIVE", "NEGATIVE")
ROOT = np.sqrt(1000.0)  # Blender's cloth time unit is 1/√1000 s
STEP = 1e-30  # the complex step: exact derivatives, no cancellation
# Turbulence's lattice: a fixed permutation of 0..255, twice (improved Perlin noise's hash); not
# Blender's own table, so its fields flutter alike in size and strength, in another pattern
PERMUTATION = np.tile(np.random.default_rng(1729).permutation(256), 2)


def _norm(a):
    """|a| per row, analytic (a complex step passes through it)."""
    return np.sqrt(np.sum(a * a, axis=-1))


def _abs(a):
    return a * np.sign(a.real)


def _fade(t):
    return t * t * t * (t * (6.0 * t - 15.0) + 10.0)


def _gradient(h, x, y, z):
    """Improved Perlin noise's gradient at a corner of hash h, dotted with the offset (x, y, z)."""
    h = h & 15
    u = np.where(h < 8, x, y)
    v = np.where(h < 4, y, np.where((h == 12) | (h == 14), x, z))
    return np.where(h & 1, -u, u) + np.where(h & 2, -v, v)


def perlin(x, y, z):
    """Improved Perlin noise (Perlin 2002) in [−1, 1], C² in the coordinates (complex-step safe:
    the lattice cell from the real parts)."""
    cell = [np.floor(c.real).astype(np.int64) for c in (x, y, z)]
    x, y, z = (c - k for c, k in zip((x, y, z), cell))
    X, Y, Z = (k & 255 for k in cell)
    u, v, w = _fade(x), _fade(y), _fade(z)
    p = PERMUTATION
    a, b = p[X] + Y, p[X + 1] + Y
    aa, ab, ba, bb = p[a] + Z, p[a + 1] + Z, p[b] + Z, p[b + 1] + Z

    def lerp(t, lo, hi):
        return lo + t * (hi - lo)

    def layer(dz, k):  # the four corners at z offset dz (hash k: 0 or 1)
        return lerp(
            v,
            lerp(u, _gradient(p[aa + k], x, y, z - dz), _gradient(p[ba + k], x - 1, y, z - dz)),
            lerp(u, _gradient(p[ab + k], x, y - 1, z - dz), _gradient(p[bb + k], x - 1, y - 1, z - dz)),
        )

    return lerp(w, layer(0.0, 0), layer(1.0, 1))


def turbulence(size, x, y, z, octaves=2):
    """Blender's BLI_noise_generic_turbulence (soft, improved Perlin basis) in [0, 1]: octaves + 1
    layers of noise, each twice as fine and half as strong, over cells of `size`."""
    if size != 0.0:
        x, y, z = x / size, y / size, z / size
    total = sum(0.5**i * (0.5 + 0.5 * perlin(2.0**i * x, 2.0**i * y, 2.0**i * z)) for i in range(octaves + 1))
    return total * (2**octaves / (2 ** (octaves + 1) - 1))


def _distance_falloff(z, power, near, far):
    """Blender's falloff_func: 1 within `near` (None: none), 0 beyond `far`, else (1 + z − near)^−power."""
    out = (1.0 + z - (near or 0.0)) ** (-power)
    if far is not None:
        out = np.where(z.real > far, 0.0, out)
    if near is not None:
        out = np.where(z.real < near, 1.0, out)
    return out


class Falloff:
    """Blender's field falloff: shape SPHERE (by the distance), TUBE (along the axis and from it)
    or CONE (along the axis and by the angle from it, in degrees); power, min and max distance
    (None: unused) along, radial ones across; z_direction: which side of the field's XY plane it
    acts on."""

    def __init__(
        self,
        shape="SPHERE",
        power=0.0,
        near=None,
        far=None,
        radial_power=0.0,
        radial_near=None,
        radial_far=None,
        z_direction="BOTH",
    ):
        if shape not in FALLOFFS or z_direction not in Z_DIRECTIONS:
            raise ValueError(f"falloff: shape must be one of {FALLOFFS}, z_direction one of {Z_DIRECTIONS}")
        self.shape, self.power, self.near, self.far = shape, float(power), near, far
        self.radial = (float(radial_power), radial_near, radial_far)
        self.z_direction = z_direction

    def __call__(self, d, axis, fac, distance):
        """The falloff at vertices d from the field's origin, fac = d·axis, distance: the shape's."""
        if self.shape == "SPHERE":
            out = _distance_falloff(distance, self.power, self.near, self.far)
        else:
            out = _distance_falloff(_abs(fac), self.power, self.near, self.far)
            if self.shape == "TUBE":
                across = _norm(d - fac[:, None] * axis)
            else:
                length = _norm(d)
                cos = fac / np.where(length.real > 1e-300, length, 1.0)
                across = np.arccos(np.clip(cos.real, -1, 1) + 1j * cos.imag) * (180 / np.pi)
            out = out * _distance_falloff(across, *self.radial)
        if self.z_direction == "POSITIVE":
            out = np.where(fac.real < 0, 0.0, out)
        elif self.z_direction == "NEGATIVE":
            out = np.where(fac.real > 0, 0.0, out)
        return out


class Effector:
    """One force field. kind: WIND, FORCE, VORTEX, DRAG or TURBULENCE; origin (3,) or per frame (frames, 3);
    axis its Z axis, likewise (zero: none, as of an object scaled to zero); strength scalar or per
    frame; shape POINT, LINE or PLANE (default: PLANE for Wind and Vortex, POINT otherwise, as
    Blender creates them); flow (Blender's Flow:
    drag toward the field's own velocity, 0 none); damping: Drag's linear part; falloff a Falloff;
    wind_factor: the share pressed along the triangles' normals (default 1 for Wind, else 0);
    gravitation: a Force's 1/r²; size and global_coords: Turbulence's cell size and whether its noise
    is taken at world positions (else from the field's origin); weight: the cloth's Field Weights
    for it (All × its type); fps: the frame rate Blender divides the strength by."""

    def __init__(
        self,
        kind,
        origin,
        axis,
        strength,
        *,
        shape=None,
        flow=0.0,
        damping=1.0,
        falloff=None,
        wind_factor=None,
        gravitation=False,
        size=1.0,
        global_coords=False,
        weight=1.0,
        fps=24.0,
    ):
        if kind not in KINDS:
            raise ValueError(f"effector kind must be one of {KINDS}, got {kind!r}")
        shape = shape or ("PLANE" if kind in ("WIND", "VORTEX") else "POINT")
        if shape not in SHAPES:
            raise ValueError(f"effector shape must be one of {SHAPES}, got {shape!r}")
        if not fps > 0:
            raise ValueError(f"effector fps must be positive, got {fps}")
        self.kind, self.shape, self.flow, self.damping = kind, shape, float(flow), float(damping)
        self.origin, self.axis, self.strength = origin, axis, strength
        self.falloff = falloff or Falloff()
        self.wind_factor = float((kind == "WIND") if wind_factor is None else wind_factor)
        self.gravitation, self.weight, self.fps = bool(gravitation), float(weight), float(fps)
        self.size, self.global_coords = float(size), bool(global_coords)

    @property
    def by_velocity(self):
        """Whether the field's vector depends on the cloth's velocity (Drag, Blender's new Vortex,
        Flow)."""
        return self.kind == "DRAG" or (self.kind == "VORTEX" and self.shape != "POINT") or self.flow != 0.0

    def checked(self, frames):
        """A copy of this field with its per-frame quantities as (frames, ...) arrays (else
        ValueError): one Effector may serve scenes of any length."""
        out = copy.copy(self)
        out.origin = per_frame(self.origin, (3,), frames, "effector origin")
        axis = per_frame(self.axis, (3,), frames, "effector axis")
        length = np.linalg.norm(axis, axis=1)
        # a zero axis (an object scaled to zero) has no direction, as Blender's normalized Z then:
        # a Point shape's force acts as ever, a Plane's and the axis's falloffs see none
        out.axis = axis / np.where(length > 0, length, 1.0)[:, None]
        out.strength = per_frame(self.strength, (), frames, "effector strength")
        return out

    def at(self, s, substeps):
        """Origin, unit axis and strength during integrator step s: the frame's it steps toward
        (frames.field_frame)."""
        f = field_frame(s, substeps)
        return self.origin[f], self.axis[f], self.strength[f]

    def velocity(self, s, substeps, x, v):
        """The field's vector at positions x, velocities v (n,3), in m/s (Blender's × √1000)."""
        origin, axis, strength = self.at(s, substeps)
        d = x - origin
        fac = d @ axis
        radial = d - fac[:, None] * axis
        vec = {"POINT": d, "LINE": radial, "PLANE": radial if self.kind == "VORTEX" else fac[:, None] * axis}[
            self.shape
        ]
        distance = _norm(vec)
        fall = self.weight * self.falloff(d, axis, fac, distance)
        out = self._vector(strength, fall, (origin, axis), d, vec, distance, v)
        if self.kind != "DRAG" and self.flow:
            out = out - (self.flow * fall)[:, None] * v
        return np.where((fall.real > 0)[:, None], out, 0.0)

    def _vector(self, strength, fall, place, d, vec, distance, v):
        """do_physical_effector's vector for this kind, times √1000 (Blender divides by fps)."""
        q = ROOT / self.fps
        origin, axis = place
        if self.kind == "WIND":
            return q * strength * fall[:, None] * axis
        if self.kind == "TURBULENCE":  # each component from the coordinates turned once more
            co = (d + origin if self.global_coords else d + axis).T  # Blender's: world, or from the field
            noise = [turbulence(self.size, *np.roll(co, -k, axis=0)) for k in range(3)]
            return q * (strength * fall)[:, None] * (2.0 * np.stack(noise, axis=1) - 1.0)
        if self.kind == "DRAG":
            speed = _norm(v)
            return -(fall * (min(strength, 2.0) * self.fps / ROOT * speed + min(self.damping, 2.0)))[:, None] * v
        safe = np.where(distance.real > 1e-300, distance, 1.0)
        if self.kind == "FORCE":
            scale = strength * fall / (safe**2 if self.gravitation else 1.0)
            return q * np.where((distance.real > 1e-300)[:, None], (scale / safe)[:, None] * vec, 0.0)
        if self.shape == "POINT":  # the old vortex: around the axis at the distance's speed
            turn = np.cross(axis, vec)
            length = _norm(turn)
            length = np.where(length.real > 1e-300, length, 1.0)
            return q * (strength * fall * distance / length)[:, None] * turn
        sf = (strength * fall)[:, None]
        turn = sf * np.cross(axis, d)
        return q * (turn + sf * np.cross(axis, turn)) - v


def field_vectors(effectors, s, substeps, x, v, jacobians=True):
    """The fields' pressing (wind) and pushing (extern) vectors at every vertex during step s (n,3
    each), and their derivatives by each vertex's position and velocity, (n,3,3) each, [i, a, b] =
    ∂vector_a/∂(x or v)_b: (wind, extern, d wind/dx, d wind/dv, d extern/dx, d extern/dv); without
    jacobians only the first two (three or six more evaluations of every field, by complex steps)."""

    def total(x, v):
        wind = np.zeros(x.shape, complex)
        extern = np.zeros(x.shape, complex)
        for eff in effectors:
            out = eff.velocity(s, substeps, x, v)
            wind += eff.wind_factor * out
            extern += (1.0 - eff.wind_factor) * out
        return wind, extern

    wind, extern = (a.real for a in total(x.astype(complex), v.astype(complex)))
    if not jacobians:
        return wind, extern
    jac = np.zeros((4, len(x), 3, 3))
    by = ((1, 0), (0, 1)) if any(e.by_velocity for e in effectors) else ((1, 0),)
    for b in range(3):
        step = np.zeros(x.shape, complex)
        step[:, b] = 1j * STEP
        for k, (on_x, on_v) in enumerate(by):
            dx, dv = on_x * step, on_v * step
            w, e = total(x + dx, v + dv)
            jac[k, :, :, b] = w.imag / STEP
            jac[2 + k, :, :, b] = e.imag / STEP
    return wind, extern, *jac
