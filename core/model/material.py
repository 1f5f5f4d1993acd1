"""Fabric in physical units, and the springs that make a mesh that fabric at any resolution.

A Fabric is what textile testing reports of a cloth: areal density (kg/m²), stretch stiffness
(N/m: force per unit width per unit strain, a sheet's 2D Young's modulus), bending rigidity
(N·m, the hinge model's), plus the air damping a simulation adds (1/s, mass-proportional). As
Blender's Cloth, it may resist compression and shear (its quads' diagonals) with stiffnesses of
their own (N/m; Blender's presets set all three equal, as these do by leaving them unset). The
presets carry Blender's names; docs/solver.md says where each value comes from.
"""

import numpy as np

from .cloth import Cloth
from .mesh import edges, polygon_of_triangles, shear_mask, triangle_areas, triangulate

# spring constant per edge = SHEET·Y·A/L², A a third of the area of the edge's triangles: a mesh of
# equilateral triangles then has the 2D Young's modulus Y (a triangular spring lattice has
# 2k/√3), and a grid split along diagonals stretches along its rows and columns with Y too
SHEET = 3.0


class Fabric:
    """density (kg/m²), stretch (N/m), bending (N·m), damping (1/s); compression and shear (N/m,
    None: the stretch stiffness)."""

    def __init__(self, density, stretch, bending, damping=0.0, name="Custom", compression=None, shear=None):
        values = (("density", density), ("stretch stiffness", stretch), ("bending rigidity", bending))
        values += tuple((what, v) for what, v in (("compression", compression), ("shear", shear)) if v is not None)
        for what, value in values:
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"fabric {what} must be positive, got {value}")
        if not (np.isfinite(damping) and damping >= 0):
            raise ValueError(f"fabric air damping must be non-negative, got {damping}")
        self.density, self.stretch, self.bending, self.damping = (
            float(v) for v in (density, stretch, bending, damping)
        )
        self.compression = None if compression is None else float(compression)
        self.shear = None if shear is None else float(shear)
        self.name = name

    def __repr__(self):
        return (
            f"Fabric({self.name!r}: {self.density:g} kg/m², stretch {self.stretch:g} N/m, bending "
            f"{self.bending:g} N·m, damping {self.damping:g}/s)"
        )

    def cloth_arguments(self, verts, faces, polygons=None):
        """Cloth(...) keyword arguments that make the mesh this fabric: total mass, per-spring
        k_tension and k_compression (in Cloth.tension_edges order), k_shear (Cloth.shear_edges),
        k_bending and damping (polygons: as Cloth's)."""
        verts = np.asarray(verts, dtype=np.float64)
        tris = triangulate(faces)
        area = triangle_areas(verts, tris)
        springs, _ = edges(tris)
        factors = spring_factors(verts, tris, springs, area)
        shear = shear_mask(springs, tris, polygon_of_triangles(faces) if polygons is None else polygons)
        return dict(
            mass=self.density * float(area.sum()),
            k_tension=self.stretch * factors[~shear],
            k_compression=None if self.compression is None else self.compression * factors[~shear],
            k_shear=(self.stretch if self.shear is None else self.shear) * factors[shear],
            k_bending=self.bending,
            damping=self.damping,
        )

    def cloth(self, verts, faces, pinned=(), polygons=None):
        """The mesh as a Cloth of this fabric (hinge bending; polygons: as Cloth's)."""
        return Cloth(
            verts, faces, pinned=pinned, fabric=self, polygons=polygons, **self.cloth_arguments(verts, faces, polygons)
        )


def spring_factors(verts, tris, tension_edges, area=None):
    """Per tension spring, its constant per unit of stretch stiffness: SHEET·A/L²."""
    area = triangle_areas(verts, tris) if area is None else area
    e = np.sort(np.concatenate([tris[:, [0, 1]], tris[:, [1, 2]], tris[:, [2, 0]]]), axis=1)
    key = e[:, 0] * len(verts) + e[:, 1]
    order = tension_edges[:, 0] * len(verts) + tension_edges[:, 1]
    share = np.bincount(np.searchsorted(order, key), weights=np.tile(area / 3.0, 3), minlength=len(order))
    length2 = np.sum((verts[tension_edges[:, 0]] - verts[tension_edges[:, 1]]) ** 2, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero-length edge: Cloth names it
        return SHEET * share / length2


# Blender's cloth presets, in physical units. Density and bending from textile measurements of
# such fabrics; stretch and damping matched to Blender's same-named preset on the artist scene
# (lowest point, 95th-percentile edge strain at 64² and 128²; docs/solver.md has the figures).
PRESETS = {
    p.name.lower(): p
    for p in (
        Fabric(0.15, 90.0, 5e-6, 1.0, "Cotton"),
        Fabric(0.06, 23.0, 1.5e-6, 2.1, "Silk"),
        Fabric(0.4, 220.0, 1e-3, 0.32, "Denim"),
        Fabric(0.9, 2000.0, 7e-4, 0.79, "Leather"),
        Fabric(1.2, 118.0, 1.25e-4, 0.105, "Rubber"),
    )
}
