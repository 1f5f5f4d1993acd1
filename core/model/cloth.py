"""The cloth: rest mesh, springs, hinges, masses, stiffness, damping and pins."""

import functools

import numpy as np

from .mesh import (
    bending_springs,
    check_mesh,
    edges,
    hinge_rest_angles,
    lumped_masses,
    polygon_of_triangles,
    shear_mask,
    triangulate,
)

# bending models and their default stiffness: a rigidity in N·m for hinges, N/m per bending spring
BENDING_DEFAULTS = {"hinge": 1e-4, "springs": 0.1}


@functools.lru_cache(maxsize=8)
def _topology(tris, polygons):
    """The tension and shear edges, hinges and bending springs of triangles and their polygons
    (as bytes of int64 arrays), read-only: the cloths a run builds from one mesh share them (its
    reading, stiffness weights, rest angles and joining made six of the character's two meshes,
    7 ms of its 250)."""
    tris, polygons = np.frombuffer(tris, np.int64).reshape(-1, 3), np.frombuffer(polygons, np.int64)
    tension, hinges = edges(tris)
    shear = shear_mask(tension, tris, polygons)
    out = tension[~shear], tension[shear], hinges, bending_springs(hinges)
    for a in out:
        a.setflags(write=False)
    return out


def _positive_per_item(value, count, what):
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(count, float(arr))
    elif arr.shape != (count,):
        raise ValueError(f"{what} must be a scalar or have shape ({count},), got {arr.shape}")
    if not np.isfinite(arr).all() or (arr <= 0).any():
        raise ValueError(f"{what} must be positive and finite")
    return arr


class Cloth:
    """A triangle mesh treated as a cloth of tension springs plus a bending model.

    mass is the total mass (kg), lumped to vertices by triangle area. The mesh's edges are springs:
    its polygons' sides (`tension_edges`) resist stretch with k_tension and compression with
    k_compression (N/m, scalars or one value per tension edge; k_compression None: each edge's
    k_tension, one stiffness both ways, whose design field is k_tension); the edges inside a
    polygon, which triangulating quads and larger polygons adds (`shear_edges`, Blender's shear
    springs), resist both with k_shear (None: k_tension, which must then be a scalar). polygons:
    per triangle of faces given as triangles, the polygon it comes from (as Blender's loop
    triangles), so that those edges are known. bending selects the bending model:
    "hinge" (default), quadratic hinge bending with k_bending a bending rigidity (N·m), scalar or
    one value per hinge (`hinges` order), the same cloth at any resolution; or "springs", the
    thesis's bending springs with k_bending in N/m per spring (`bending_edges` order). k_bending
    None takes the model's default (BENDING_DEFAULTS). damping is mass-proportional air damping
    c (1/s): f = -c·m·v, one value or one per vertex. pinned lists vertex indices whose positions are prescribed. fabric: the
    Fabric the arguments came from (Fabric.cloth), so that messages name its settings; replace()
    drops it. shrink: per-vertex factors (n,) that scale the springs' rest lengths by √(sᵢsⱼ), as
    Blender's Shrinking does (None: as modelled; hinges keep their rest angles). sewing: vertex
    pairs (S,2) pulled together by zero-length springs of k_sewing (N/m, per pair; None: the mean
    k_tension), their force capped at sewing_force (N; 0: none), as Blender's sewing springs.
    rest_angles: hinges bend about the rest mesh's own dihedral angles (core.terms.rest_angles),
    so a collar or a sleeve modelled round keeps its shape, as Blender's Cloth keeps it; False (the
    default for now: the term's assembly costs a garment 1.3–1.9× the time, docs/benchmarks.md):
    about flat, the quadratic model's own (a curved rest then carries bending energy). masses:
    per-vertex masses (n,) in kg instead of `mass` lumped by area (join: cloths of their own
    density).
    """

    def __init__(
        self,
        verts,
        faces,
        mass=0.5,
        k_tension=20.0,
        k_bending=None,
        damping=0.0,
        pinned=(),
        bending="hinge",
        fabric=None,
        k_compression=None,
        k_shear=None,
        polygons=None,
        shrink=None,
        sewing=None,
        k_sewing=None,
        sewing_force=0.0,
        rest_angles=False,
        masses=None,
    ):
        if bending not in BENDING_DEFAULTS:
            raise ValueError(f"bending must be one of {', '.join(map(repr, BENDING_DEFAULTS))}, got {bending!r}")
        verts = np.array(verts, dtype=np.float64)
        tris = triangulate(faces)
        check_mesh(verts, tris)
        self.rest = verts
        self.tris = tris
        self.polygons = polygon_of_triangles(faces) if polygons is None else np.asarray(polygons, np.int64)
        if self.polygons.shape != (len(tris),):
            raise ValueError(f"polygons must give one polygon per triangle ({len(tris)}), got {self.polygons.shape}")
        self.n = len(verts)
        self.shrink = None if shrink is None else _positive_per_item(shrink, self.n, "shrink factor")
        self.bending = bending
        topology = _topology(np.asarray(tris, np.int64).tobytes(), self.polygons.tobytes())
        self.tension_edges, self.shear_edges, self.hinges, self.bending_edges = topology
        lengths = self.rest_lengths
        if (lengths <= 1e-9 * np.ptp(verts, axis=0).max()).any():
            k = int(np.argmin(lengths))
            raise ValueError(f"spring {tuple(int(i) for i in self.edges[k])} has zero rest length")
        if not (np.isfinite(mass) and mass > 0):
            raise ValueError(f"cloth mass must be positive, got {mass}")
        damping = np.asarray(damping, dtype=np.float64)
        if damping.shape not in ((), (self.n,)) or not (np.isfinite(damping).all() and (damping >= 0).all()):
            raise ValueError(f"air damping must be non-negative, one value or one per vertex ({self.n}), got {damping}")
        if masses is None:
            self.mass, self.masses = float(mass), lumped_masses(verts, tris, float(mass))
        else:
            self.masses = _positive_per_item(masses, self.n, "vertex masses")
            self.mass = float(self.masses.sum())
        self.k_tension = _positive_per_item(k_tension, len(self.tension_edges), "k_tension")
        self.own_compression = (
            None if k_compression is None else _positive_per_item(k_compression, self.n_tension, "k_compression")
        )
        if k_shear is None and len(self.shear_edges):
            if np.ndim(k_tension):
                raise ValueError("k_shear must be given (per shear edge) where k_tension is given per tension edge")
            k_shear = k_tension
        self.k_shear = _positive_per_item(np.zeros(0) if k_shear is None else k_shear, self.n_shear, "k_shear")
        n_bending = len(self.hinges) if bending == "hinge" else len(self.bending_edges)
        self.k_bending = _positive_per_item(
            BENDING_DEFAULTS[bending] if k_bending is None else k_bending,
            n_bending,
            "bending rigidity k_bending" if bending == "hinge" else "k_bending",
        )
        self.damping = float(damping) if damping.ndim == 0 else damping
        pinned = np.unique(np.asarray(pinned, dtype=np.int64).ravel())
        if len(pinned) and (pinned.min() < 0 or pinned.max() >= self.n):
            bad = pinned[(pinned < 0) | (pinned >= self.n)][0]
            raise ValueError(f"pin index {bad} is out of range 0..{self.n - 1}")
        if len(pinned) == self.n:
            raise ValueError("every vertex is pinned: nothing to simulate")
        self.pinned = pinned
        self.fabric = fabric
        self.rest_angles = bool(rest_angles)
        self._sew(sewing, k_sewing, sewing_force)

    @functools.cached_property
    def curved_hinges(self):
        """The hinges bent at rest that bend about their rest angle (mesh.hinge_rest_angles: their
        indices, β̄, cos²(θ̄/2), triangle scales), or None: hinge bending about the rest shape's own
        angles where rest_angles, and some hinge is not flat at rest."""
        if self.bending != "hinge" or not self.rest_angles:
            return None
        curved = hinge_rest_angles(self.rest, self.hinges)
        return curved if len(curved[0]) else None

    def _sew(self, sewing, k_sewing, sewing_force):
        """The sewing pairs, their stiffness and force cap, checked (see the class)."""
        pairs = np.zeros((0, 2), np.int64) if sewing is None else np.asarray(sewing, np.int64).reshape(-1, 2)
        if len(pairs) and (pairs.min() < 0 or pairs.max() >= self.n):
            raise ValueError(f"sewing pairs name vertices outside 0..{self.n - 1}")
        k = self.k_tension.mean() if k_sewing is None else k_sewing
        self.sewing_edges, self.k_sewing = pairs, _positive_per_item(k, len(pairs), "k_sewing")
        if not (np.isfinite(sewing_force) and sewing_force >= 0):
            raise ValueError(f"the sewing force cap must be non-negative (0: none), got {sewing_force}")
        self.sewing_force = float(sewing_force)

    @property
    def n_tension(self):
        return len(self.tension_edges)

    @property
    def n_bending(self):
        """Bending elements: hinges, or bending springs."""
        return len(self.k_bending)

    @property
    def k_compression(self):
        """Per tension edge, its stiffness under compression."""
        return self.k_tension if self.own_compression is None else self.own_compression

    @property
    def n_shear(self):
        return len(self.shear_edges)

    def first_vertices(self, field):
        """A vertex of each of a stiffness field's springs or hinges ("k_tension", "k_compression",
        "k_shear", "k_bending"): which cloth of a joined one it is on."""
        if field in ("k_tension", "k_compression"):
            return self.tension_edges[:, 0]
        if field == "k_shear":
            return self.shear_edges[:, 0]
        return (self.hinges if self.bending == "hinge" else self.bending_edges)[:, 0]

    @property
    def edges(self):
        """All springs: tension, shear, then (bending="springs") the bending springs."""
        springs = [self.tension_edges, self.shear_edges] + ([self.bending_edges] if self.bending == "springs" else [])
        return np.concatenate(springs)

    @property
    def stiffness(self):
        """The springs' k in `edges` order (a tension edge's stretch stiffness)."""
        ks = [self.k_tension, self.k_shear] + ([self.k_bending] if self.bending == "springs" else [])
        return np.concatenate(ks)

    @property
    def rest_lengths(self):
        return self.spring_lengths(self.edges)

    def spring_lengths(self, edges):
        """The rest lengths of springs between vertex pairs (E,2): their distance at rest, times
        √(sᵢsⱼ) of the ends' shrink factors where the cloth shrinks (Blender's Shrinking)."""
        lengths = np.linalg.norm(self.rest[edges[:, 0]] - self.rest[edges[:, 1]], axis=1)
        return (
            lengths if self.shrink is None else lengths * np.sqrt(self.shrink[edges[:, 0]] * self.shrink[edges[:, 1]])
        )

    def weighted(self, tension=None, compression=None, shear=None, bending=None):
        """A copy whose stiffness varies over the mesh as Blender's Property Weights make it: each
        argument a per-vertex factor (n,) (None: unchanged), and each element scaled by the mean
        of its two ends' (a hinge's: its edge's ends). Blender's k = base + w̄·|max − base| is
        base times the mean of 1 + wᵢ·|max/base − 1|. A cloth whose compression follows its
        tension keeps following it unless compression is given."""

        def scaled(k, factor, ends):
            return k if factor is None else k * np.asarray(factor, dtype=np.float64)[ends].mean(axis=1)

        own = self.own_compression
        if compression is not None:
            own = scaled(self.k_compression, compression, self.tension_edges)
        return self.replace(
            k_tension=scaled(self.k_tension, tension, self.tension_edges),
            k_compression=own,
            k_shear=scaled(self.k_shear, shear, self.shear_edges),
            k_bending=scaled(
                self.k_bending, bending, self.hinges[:, :2] if self.bending == "hinge" else self.bending_edges
            ),
            fabric=self.fabric,
        )

    def replace(self, **changes):
        """A copy with some of the constructor's arguments changed; another bending model starts
        from its default k_bending unless one is given."""
        args = dict(
            verts=self.rest,
            faces=self.tris,
            polygons=self.polygons,
            mass=self.mass,
            k_tension=self.k_tension,
            k_compression=self.own_compression,
            k_shear=self.k_shear,
            k_bending=self.k_bending,
            damping=self.damping,
            pinned=self.pinned,
            bending=self.bending,
            shrink=self.shrink,
            sewing=self.sewing_edges,
            k_sewing=self.k_sewing,
            sewing_force=self.sewing_force,
            rest_angles=self.rest_angles,
            masses=self.masses,
        )
        if "mass" in changes or "verts" in changes:  # lumped again
            args["masses"] = None
        if changes.get("bending", self.bending) != self.bending:
            args["k_bending"] = None
        args.update(changes)
        return Cloth(**args)


def _joined_damping(cloths):
    """One air damping where the cloths share it, else one per vertex."""
    per_vertex = [np.broadcast_to(c.damping, (c.n,)) for c in cloths]
    joined = np.concatenate(per_vertex)
    return float(joined[0]) if np.all(joined == joined[0]) else joined


class JoinError(ValueError):
    """Cloths (or their scenes, core.Joined) that cannot be joined: cloth `index` differs from
    the first in `key`, which they must share."""

    def __init__(self, key, index):
        super().__init__(f"join: cloth {index} differs from cloth 0 in {key}, which joined cloths share")
        self.key, self.index = key, index


def join(cloths):
    """Several cloths as one: their vertices, triangles and every per-element array in turn (pins,
    sewing pairs and polygons renumbered), each keeping its own masses, stiffness, shrinking and
    rest and air damping. A scene's self-collision (Scene(self_distance=...)) then acts between
    them as within each. They share what a scene holds once: the bending model, the sewing force
    cap and whether hinges keep their rest angles (else JoinError)."""
    cloths = list(cloths)
    if not cloths:
        raise ValueError("join: no cloths")
    for what in ("bending", "rest_angles"):
        for i, c in enumerate(cloths):
            if getattr(c, what) != getattr(cloths[0], what):
                raise JoinError(what, i)
    sewn = [(i, c.sewing_force) for i, c in enumerate(cloths) if len(c.sewing_edges)]
    for i, force in sewn:
        if force != sewn[0][1]:
            raise JoinError("sewing_force", i)
    starts = np.cumsum([0] + [c.n for c in cloths[:-1]])
    polygons = np.cumsum([0] + [c.polygons.max() + 1 for c in cloths[:-1]])

    def cat(arrays):
        return np.concatenate([np.asarray(a) for a in arrays])

    return Cloth(
        cat([c.rest for c in cloths]),
        cat([c.tris + o for c, o in zip(cloths, starts)]),
        k_tension=cat([c.k_tension for c in cloths]),
        k_compression=cat([c.k_compression for c in cloths])
        if any(c.own_compression is not None for c in cloths)
        else None,
        k_shear=cat([c.k_shear for c in cloths]),
        k_bending=cat([c.k_bending for c in cloths]),
        damping=_joined_damping(cloths),
        pinned=cat([c.pinned + o for c, o in zip(cloths, starts)]),
        bending=cloths[0].bending,
        polygons=cat([c.polygons + o for c, o in zip(cloths, polygons)]),
        shrink=cat([np.ones(c.n) if c.shrink is None else c.shrink for c in cloths])
        if any(c.shrink is not None for c in cloths)
        else None,
        sewing=cat([c.sewing_edges + o for c, o in zip(cloths, starts)]),
        k_sewing=cat([c.k_sewing for c in cloths]),
        sewing_force=sewn[0][1] if sewn else 0.0,
        rest_angles=cloths[0].rest_angles,
        masses=cat([c.masses for c in cloths]),
    )
