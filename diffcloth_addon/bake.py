"""Simulated frames → shape keys, one per frame, each keyed 0/1/0 around its frame, linearly."""

import numpy as np

from .reading import BAKE_PREFIX, action_fcurves


def clear_bake(obj):
    """Remove DiffCloth's shape keys and their animation; the Basis and other keys stay."""
    keys = obj.data.shape_keys
    if keys is None:
        return 0
    ours = [b for b in keys.key_blocks if b.name.startswith(BAKE_PREFIX)]
    for fc in action_fcurves(keys.animation_data):
        if any(f'key_blocks["{b.name}"]' in fc.data_path for b in ours):
            fc.keyframe_points.clear()
    for b in ours:
        obj.shape_key_remove(b)
    return len(ours)


def bake(obj, positions, start, matrices):
    """Shape keys for frames start, start+1, … from world positions (frames, n, 3), each frame put
    into that frame's object space (matrices: (frames, 4, 4) world matrices), so a parented or
    animated cloth shows what was simulated. Keys are linear: subframes blend linearly.
    All or nothing: every frame's shape is computed before the previous bake is touched."""
    local = []
    for frame, (world, mw) in enumerate(zip(positions, matrices), start):
        inv = np.linalg.inv(mw)
        co = world @ inv[:3, :3].T + inv[:3, 3]
        if not np.isfinite(co).all():
            raise np.linalg.LinAlgError(f"the object's transform at frame {frame} cannot be inverted")
        local.append(co.ravel())
    clear_bake(obj)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
    names = []
    for frame, co in enumerate(local, start):
        block = obj.shape_key_add(name=f"{BAKE_PREFIX}{frame:04d}", from_mix=False)
        block.data.foreach_set("co", co)
        for f, value in ((frame - 1, 0.0), (frame, 1.0), (frame + 1, 0.0)):
            block.value = value
            block.keyframe_insert("value", frame=f)
        names.append(f'key_blocks["{block.name}"].value')
    ours = set(names)
    for fc in action_fcurves(obj.data.shape_keys.animation_data):
        if fc.data_path in ours:
            for k in fc.keyframe_points:
                k.interpolation = "LINEAR"
    obj.data.update()
