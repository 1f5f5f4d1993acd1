"""Blender's Collision physics as DiffCloth mesh colliders (main thread only).

Every object with Collision physics (its modifier enabled in the viewport, Collision on) that has
no DiffCloth role collides with the cloth: its evaluated mesh in world space at every frame
(armature, shape keys, modifiers, object and parent animation all count), Thickness Outer as the
distance kept, Single Sided as one-sidedness, and Friction as Blender's cloth collision reads it,
μ = Friction × 0.01.
"""

import numpy as np

from .. import core as dc
from .errors import InputError

# Blender's cloth collision: μ = Friction × 0.01 (`pdef_cfrict * 0.01f` in its collision response)
FRICTION_SCALE = 0.01


def collision_objects(scene, cloths):
    """The scene's Collision-physics meshes that collide with the cloths run (the Sphere and Plane
    roles collide as themselves, never twice; targets never): other cloths among them, not run
    with these, collide as they are baked, one way."""
    return [
        o
        for o in scene.objects
        if o.type == "MESH"
        and o not in cloths
        and o.diffcloth.role in ("NONE", "CLOTH")
        and o.collision is not None
        and o.collision.use
        and any(m.type == "COLLISION" and m.show_viewport for m in o.modifiers)
    ]


class MeshReader:
    """One Collision object's triangles and its world vertices at each frame read."""

    def __init__(self, obj, triangles):
        self.obj = obj
        self.tris, self.poses, self.warnings = triangles, [], []
        self.mirrored = None

    def read(self, verts, frame, mirrored=False):
        """Its world vertices at a frame; mirrored: its world matrix turns space inside out (a negative
        scale), so its triangles' winding, which says what is outside, turns with it."""
        if self.mirrored is None:
            self.mirrored = mirrored
        elif mirrored != self.mirrored and self.obj.collision.use_culling:
            raise InputError(
                f"collider '{self.obj.name}' is Single Sided and its scale turns negative or back at frame "
                f"{frame}, which swaps its inside and outside: animate its scale without a sign change, or "
                "untick Single Sided"
            )
        if len(verts) != (len(self.poses[0]) if self.poses else len(verts)):
            raise InputError(
                f"collider '{self.obj.name}': its vertex count changes from {len(self.poses[0])} to "
                f"{len(verts)} at frame {frame} (a modifier such as Remesh or Boolean?): apply it first"
            )
        if not np.isfinite(verts).all():
            raise InputError(f"collider '{self.obj.name}' has a NaN or infinite vertex at frame {frame}")
        self.poses.append(verts)

    def build(self):
        """The core MeshCollider (degenerate faces left out, with a warning), or an InputError."""
        if len(self.tris) == 0:
            raise InputError(f"collider '{self.obj.name}' has no faces: give it faces or remove its Collision physics")
        poses = np.array(self.poses)
        rest = poses[0]
        corners = rest[self.tris]
        area2 = np.linalg.norm(np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0]), axis=1)
        good = area2 > 1e-12 * max(float(np.ptp(rest, axis=0).max()), 1e-300) ** 2
        if not good.any():
            raise InputError(f"collider '{self.obj.name}': every face is degenerate (zero area)")
        if not good.all():
            self.warnings.append(
                f"collider '{self.obj.name}': {int((~good).sum())} degenerate face(s) of zero area left out"
            )
        settings = self.obj.collision
        still = np.allclose(poses, rest, rtol=0, atol=1e-9)
        # Blender draws a mirrored mesh's normals pointing out: so does its winding, as read here
        tris = self.tris[good][:, ::-1] if self.mirrored else self.tris[good]
        return dc.MeshCollider(
            rest if still else poses,
            tris,
            thickness=settings.thickness_outer,
            friction=settings.cloth_friction * FRICTION_SCALE,
            one_sided=settings.use_culling,
        )
