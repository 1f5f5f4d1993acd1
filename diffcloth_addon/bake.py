"""Simulated frames → the cloth's bake, at DiffCloth's place in its modifier stack
(reading.stack_place): shape keys, one per frame, each keyed 0/1/0 around its frame, linearly,
where that place is before every modifier; else, after the modifiers that carry the cloth (an
Armature, a Hook), a Mesh Cache modifier reading a PC2 file of float32 positions beside the .blend
(as Blender's own point cache stores them), which replaces what they made of the mesh."""

import contextlib
import hashlib
import os
import shutil
import struct

import bpy
import numpy as np

from .reading import BAKE_PREFIX, CACHE_MODIFIER, action_fcurves, ours, stack_place

PC2_HEADER = "<12siiffi"  # signature, version, vertices, start frame, frames per sample, samples


def _cache(obj):
    """DiffCloth's Mesh Cache modifier on obj, or None."""
    return next((m for m in obj.modifiers if ours(m)), None)


def _safe(name):
    """name as a file name, one per name: Blender's clean_name where that keeps it, else that
    with a hash of the name ("Cape.L" and "Cape_L" must not share a file)."""
    clean = bpy.path.clean_name(name)
    return clean if clean == name else f"{clean}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def cache_folder(blend):
    """The folder of the caches of the .blend at path blend: diffcloth_cache/<its name>/ beside it
    (each file its own: a Save As beside it must not play, nor overwrite, the other's bakes)."""
    stem = os.path.splitext(os.path.basename(blend))[0]
    return os.path.join(os.path.dirname(os.path.abspath(blend)), "diffcloth_cache", _safe(stem))


# the .blend bakes and saves are written for where that is not the open file (written_as), or None
_WRITING_TO = None


@contextlib.contextmanager
def written_as(blend):
    """Within it, bakes and saves keep their caches as the .blend at path blend's (the batch
    command's --output, saved under a temporary name: the file it read keeps its own)."""
    global _WRITING_TO
    _WRITING_TO = os.path.abspath(blend)
    try:
        yield
    finally:
        _WRITING_TO = None


def cache_path(obj):
    """Where a carried cloth's bake is kept: in the cache_folder of the saved .blend (a path
    relative to it; or of written_as's), else Blender's temporary folder until the file is saved."""
    name = _safe(obj.name) + ".pc2"
    blend = _WRITING_TO or bpy.data.filepath
    if blend:
        return bpy.path.relpath(os.path.join(cache_folder(blend), name))
    return os.path.join(bpy.app.tempdir, name)


# what keep_caches changed for the save under way: (object, modifier, its path before, that file)
_SAVING: list[tuple[str, str, str, str]] = []


def keep_caches(filepath):
    """Give the .blend about to be saved at filepath its carried cloths' caches, beside it: each is
    copied there from where it is (beside another .blend, or in Blender's temporary folder while the
    file was unsaved, cache_path), so that the saved file plays its own bake wherever the one it
    came from goes. A saved file's path to it is relative to the file being saved over, which
    Blender's save rebases onto the new one (its Remap Relative, on by default and in the batch
    command's save): the saved file and its cache folder move together. after_save finishes."""
    _SAVING.clear()
    folder = cache_folder(_WRITING_TO or filepath)
    caches = [m for obj in bpy.data.objects for m in obj.modifiers if ours(m)]
    for m in caches:
        path = os.path.abspath(bpy.path.abspath(m.filepath))
        kept = os.path.join(folder, os.path.basename(path))
        if path == kept or not os.path.isfile(path):
            continue
        os.makedirs(folder, exist_ok=True)
        shutil.copyfile(path, kept)
        _SAVING.append((m.id_data.name, m.name, m.filepath, path))
        m.filepath = bpy.path.relpath(kept) if bpy.data.filepath else kept


def after_save(filepath):
    """After a save keep_caches prepared: a copy saved elsewhere (Save Copy, the batch command's
    --output) leaves the open file playing its own caches, as before; a file saved for the first
    time drops the temporary folder's caches it now keeps beside it."""
    copy = os.path.abspath(bpy.data.filepath or os.curdir) != os.path.abspath(filepath)
    temporary = os.path.abspath(bpy.app.tempdir)
    for name, modifier, before, path in _SAVING:
        obj = bpy.data.objects.get(name)
        m = obj.modifiers.get(modifier) if obj is not None else None
        if copy and m is not None:
            m.filepath = before
        elif not copy and path.startswith(temporary) and os.path.isfile(path):
            os.remove(path)
    _SAVING.clear()


def clear_bake(obj):
    """Remove DiffCloth's bake: its shape keys and their animation (the Basis and other keys stay),
    or its Mesh Cache modifier and file. Returns what it removed, as the artist reads it."""
    removed = [what for what in (_remove_cache(obj), _remove_keys(obj)) if what]
    return " and ".join(removed) or "no bake"


def _remove_cache(obj):
    """The Mesh Cache modifier, and its file unless another object's plays it (a copy of the
    cloth made with its bake)."""
    found = [m for m in obj.modifiers if ours(m)]
    for m in found:
        path = os.path.abspath(bpy.path.abspath(m.filepath))
        shared = any(
            os.path.abspath(bpy.path.abspath(other.filepath)) == path
            for o in bpy.data.objects
            if o != obj
            for other in o.modifiers
            if ours(other)
        )
        if os.path.isfile(path) and not shared:
            os.remove(path)
        m.driver_remove("factor")
        obj.modifiers.remove(m)
    return "its Mesh Cache bake" if found else ""


def _remove_keys(obj):
    keys = obj.data.shape_keys
    if keys is None:
        return ""
    mine = [b for b in keys.key_blocks if b.name.startswith(BAKE_PREFIX)]
    for fc in action_fcurves(keys.animation_data):
        if any(f'key_blocks["{b.name}"]' in fc.data_path for b in mine):
            fc.keyframe_points.clear()
    for b in mine:
        obj.shape_key_remove(b)
    return f"{len(mine)} baked shape keys" if mine else ""


def bake(obj, positions, start, matrices):
    """The bake of frames start, start+1, … from world positions (frames, n, 3), each frame put
    into that frame's object space (matrices: (frames, 4, 4) world matrices), so a parented or
    animated cloth shows what was simulated; playing linearly between frames. All or nothing:
    every frame is computed (and a cache written) before the previous bake is touched."""
    local = []
    for frame, (world, mw) in enumerate(zip(positions, matrices), start):
        inv = np.linalg.inv(mw)
        co = world @ inv[:3, :3].T + inv[:3, 3]
        if not np.isfinite(co).all():
            raise np.linalg.LinAlgError(f"the object's transform at frame {frame} cannot be inverted")
        local.append(co)
    if stack_place(obj):
        path = cache_path(obj)
        _write_pc2(bpy.path.abspath(path), np.array(local), start)  # replaces the last one's file
        _remove_keys(obj)
        _cache_modifier(obj, path, start)
    else:
        clear_bake(obj)
        _shape_keys(obj, local, start)
    obj.data.update()


def baked_positions(obj, start, end):
    """DiffCloth's bake of frames start..end in the object's space (frames, n, 3), as written:
    its shape keys, or its Mesh Cache file; None where it lacks a frame, a vertex or its file."""
    n = len(obj.data.vertices)
    cache = _cache(obj)
    if cache is not None:
        path = bpy.path.abspath(cache.filepath)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            _, _, count, first, _, frames = struct.unpack(PC2_HEADER, f.read(struct.calcsize(PC2_HEADER)))
            if count != n or first > start or first + frames - 1 < end:
                return None
            data = np.frombuffer(f.read(), "<f4")
        return data.reshape(frames, n, 3)[int(start - first) : int(end - first) + 1].astype(np.float64)
    keys = obj.data.shape_keys
    blocks = [None if keys is None else keys.key_blocks.get(f"{BAKE_PREFIX}{f:04d}") for f in range(start, end + 1)]
    if any(b is None or len(b.data) != n for b in blocks):
        return None
    out = np.empty((len(blocks), n * 3), np.float32)
    for row, b in zip(out, blocks):
        b.data.foreach_get("co", row)
    return out.reshape(-1, n, 3).astype(np.float64)


def _write_pc2(path, local, start):
    """A PC2 point cache (float32 positions per frame and vertex), written whole then moved in."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    frames, n, _ = local.shape
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack(PC2_HEADER, b"POINTCACHE2\0", 1, n, float(start), 1.0, frames))
        f.write(local.astype("<f4").tobytes())
    os.replace(path + ".tmp", path)


def _cache_modifier(obj, path, start):
    """DiffCloth's Mesh Cache modifier, playing path from frame start, at DiffCloth's place."""
    mod = _cache(obj) or obj.modifiers.new(CACHE_MODIFIER, "MESH_CACHE")
    mod.cache_format, mod.filepath, mod.frame_start = "PC2", path, float(start)
    mod.play_mode, mod.time_mode, mod.deform_mode, mod.interpolation = "SCENE", "FRAME", "OVERWRITE", "LINEAR"
    mod.forward_axis, mod.up_axis, mod.factor = "POS_Y", "POS_Z", 1.0
    # before its first frame the cloth is its input (it follows the rig), as Blender's Cloth shows
    # it there: the cache's influence is 0 until then (a simple expression: no Python is run)
    mod.driver_add("factor").driver.expression = f"frame >= {int(start)}"
    index = list(obj.modifiers).index(mod)
    place = stack_place(obj)  # counted without ours
    if index != place:
        obj.modifiers.move(index, place)


def _shape_keys(obj, local, start):
    if obj.data.shape_keys is None:
        obj.shape_key_add(name="Basis", from_mix=False)
    names = []
    for frame, co in enumerate(local, start):
        block = obj.shape_key_add(name=f"{BAKE_PREFIX}{frame:04d}", from_mix=False)
        block.data.foreach_set("co", co.ravel())
        # the last frame's key stays on after it: the cloth holds its last pose, as Blender's does
        last = frame == start + len(local) - 1
        for f, value in ((frame - 1, 0.0), (frame, 1.0)) + (() if last else ((frame + 1, 0.0),)):
            block.value = value
            block.keyframe_insert("value", frame=f)
        names.append(f'key_blocks["{block.name}"].value')
    mine = set(names)
    for fc in action_fcurves(obj.data.shape_keys.animation_data):
        if fc.data_path in mine:
            for k in fc.keyframe_points:
                k.interpolation = "LINEAR"
