"""Simulated frames → shape keys, one per frame, each keyed 0/1/0 around its frame."""

import numpy as np

from .convert import BAKE_PREFIX, action_fcurves


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


def bake(obj, positions, start, matrix_world):
    """Shape keys for frames start, start+1, … from world positions (frames, n, 3)."""
    n = len(obj.data.vertices)
    if positions.shape[1] != n:
        raise ValueError(f"cloth '{obj.name}' has {n} vertices in its mesh but {positions.shape[1]} after "
                         "modifiers; apply the modifiers that change the vertex count before baking")
    clear_bake(obj)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
    inv = np.linalg.inv(np.asarray(matrix_world))
    for i, world in enumerate(positions):
        frame = start + i
        local = world @ inv[:3, :3].T + inv[:3, 3]
        block = obj.shape_key_add(name=f"{BAKE_PREFIX}{frame:04d}", from_mix=False)
        block.data.foreach_set("co", local.ravel())
        for f, value in ((frame - 1, 0.0), (frame, 1.0), (frame + 1, 0.0)):
            block.value = value
            block.keyframe_insert("value", frame=f)
    obj.data.update()
