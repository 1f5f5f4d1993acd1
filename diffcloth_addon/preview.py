"""The batch command's picture, rendered by Blender (Workbench): at each keyframe the result (solid
blue) inside the target (red wireframe) with the colliders (grey) and the frame number, above the
loss curve on a log scale with labelled axes. Built in a throw-away scene, composed and written as
PNG through Blender's image API, and removed again."""

import contextlib
import math
import os
import sys
import tempfile

import bpy
import numpy as np
from mathutils import Matrix, Vector

RESULT = (0.12, 0.33, 0.85, 1.0)
TARGET = (0.88, 0.15, 0.12, 1.0)
COLLIDER = (0.62, 0.62, 0.62, 1.0)
INK = (0.08, 0.08, 0.08, 1.0)
PANEL = 420  # pixels per keyframe (at least two panels wide)
# the cloth view: looking down 25° from the front-left
VIEW = Vector((math.sin(math.radians(30)), math.cos(math.radians(30)), -math.tan(math.radians(25)))).normalized()


class _Stage:
    """A temporary scene and everything made for it; removed on exit."""

    def __init__(self):
        self.scene = bpy.data.scenes.new("DiffCloth Preview")
        self.made = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for block in reversed(self.made):
            collection = {
                bpy.types.Object: bpy.data.objects,
                bpy.types.Mesh: bpy.data.meshes,
                bpy.types.Camera: bpy.data.cameras,
                bpy.types.World: bpy.data.worlds,
            }.get(type(block), bpy.data.curves)
            collection.remove(block)
        bpy.data.scenes.remove(self.scene)

    def add(self, name, data, color, matrix=None):
        obj = bpy.data.objects.new(name, data)
        obj.color, obj.matrix_world = color, Matrix() if matrix is None else matrix
        self.scene.collection.objects.link(obj)
        self.made += [data, obj]
        return obj

    def mesh(self, name, verts, faces, color, wire=0.0):
        me = bpy.data.meshes.new(name)
        me.from_pydata(np.asarray(verts).tolist(), [], np.asarray(faces).tolist())
        obj = self.add(name, me, color)
        if wire:
            mod = obj.modifiers.new("wire", "WIREFRAME")
            mod.thickness, mod.use_replace = wire, True
        return obj

    def text(self, body, at, size, rotation, align="CENTER"):
        cu = bpy.data.curves.new(body, "FONT")
        cu.body, cu.size, cu.align_x, cu.align_y = body, size, align, "CENTER"
        return self.add(body, cu, INK, Matrix.Translation(at) @ rotation.to_4x4())

    def line(self, points, width, color):
        cu = bpy.data.curves.new("line", "CURVE")
        cu.dimensions, cu.bevel_depth = "3D", width
        spline = cu.splines.new("POLY")
        spline.points.add(len(points) - 1)
        spline.points.foreach_set("co", np.hstack([points, np.ones((len(points), 1))]).ravel())
        return self.add("line", cu, color)

    def render(self, path, eye, rotation, ortho_scale, width, height):
        cam = bpy.data.cameras.new("camera")
        cam.type, cam.ortho_scale, cam.clip_end, cam.sensor_fit = "ORTHO", ortho_scale, 1e4, "HORIZONTAL"
        self.scene.camera = self.add("camera", cam, INK, Matrix.Translation(eye) @ rotation.to_4x4())
        sc = self.scene
        sc.render.engine = "BLENDER_WORKBENCH"
        sc.render.resolution_x, sc.render.resolution_y, sc.render.resolution_percentage = width, height, 100
        sc.render.image_settings.file_format, sc.render.filepath = "PNG", path
        sc.display.shading.light, sc.display.shading.color_type = "STUDIO", "OBJECT"
        sc.display.shading.show_cavity = False
        sc.display_settings.display_device, sc.view_settings.view_transform = "sRGB", "Standard"
        sc.render.film_transparent = False
        if sc.world is None:
            sc.world = bpy.data.worlds.new("DiffCloth Preview")
            self.made.append(sc.world)
        sc.world.color = (1.0, 1.0, 1.0)
        with _quiet():
            bpy.ops.render.render(write_still=True, scene=sc.name)


@contextlib.contextmanager
def _quiet():
    """Keep what Blender's renderer prints at the C level out of the user's terminal: headless, its
    GPU set-up reports "EGL Error" lines that are harmless (Workbench falls back and renders), and
    it announces each temporary image it saves. Printed after all if the render fails."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(fd) for fd in (1, 2)]
    with tempfile.TemporaryFile(mode="w+b") as capture:
        for fd in (1, 2):
            os.dup2(capture.fileno(), fd)
        try:
            yield
        except BaseException:
            _restore(saved)
            capture.seek(0)
            sys.stderr.write(capture.read().decode(errors="replace"))
            raise
        _restore(saved)


def _restore(saved):
    for fd, copy in zip((1, 2), saved):
        os.dup2(copy, fd)
        os.close(copy)


def _collider_meshes(stage, colliders, frame, offset, reach, centre):
    for col in colliders:  # spheres, planes and Collision-physics meshes alike
        verts, faces = col.surface(frame, centre, reach)
        stage.mesh("collider", verts + offset, faces, COLLIDER)


def _keyframes(path, keyframes, tris, colliders):
    """keyframes: (scene frame, frame index, target (n,3), result (n,3)); one panel each."""
    pts = np.concatenate([np.concatenate([t, r]) for _, _, t, r in keyframes])
    centre = (pts.min(axis=0) + pts.max(axis=0)) / 2
    reach = 0.5 * float(np.linalg.norm(np.ptp(pts, axis=0))) + 1e-6
    right = VIEW.cross(Vector((0, 0, 1))).normalized()
    up = right.cross(VIEW)
    rotation = Matrix((right, up, -VIEW)).transposed()
    spacing = 2.2 * reach
    front = 10 * reach * VIEW  # labels in front of any collider, which may reach past the cloth
    with _Stage() as stage:
        for k, (label, frame, target, result) in enumerate(keyframes):
            offset = np.array((k - (len(keyframes) - 1) / 2) * spacing * right)
            stage.mesh("result", result + offset, tris, RESULT)
            stage.mesh("target", target + offset, tris, TARGET, wire=0.008 * reach)
            _collider_meshes(stage, colliders, frame, offset, reach, centre)
            stage.text(f"frame {label}", Vector(centre + offset) + 1.15 * reach * up - front, 0.16 * reach, rotation)
        eye = Vector(centre) - 20 * reach * VIEW
        columns = max(len(keyframes), 2)  # room for the legend and a readable loss curve
        stage.render(path, eye, rotation, columns * spacing, columns * PANEL, int(PANEL * 1.15))


def _ticks(lo, hi, count=5):
    step = 10 ** math.floor(math.log10(max(hi - lo, 1e-9) / count))
    step *= next(m for m in (1, 2, 5, 10) if (hi - lo) / (m * step) <= count)
    return np.arange(math.ceil(lo / step) * step, hi + 1e-9, step)


def _loss_curve(path, losses, width):
    """Normalized loss per iteration, log10 axis, in the XZ plane seen from −Y."""
    values = np.log10(np.maximum(np.asarray(losses, float) / losses[0], 1e-16))
    bottom = min(math.floor(values.min()), -1)
    w, h = 4.0, 2.0
    last = max(len(values) - 1, 1)
    x = np.arange(len(values)) * w / last
    z = (values / -bottom + 1) * h
    face = Matrix.Rotation(math.pi / 2, 3, "X")
    with _Stage() as stage:
        if len(values) > 1:
            stage.line(np.stack([x, np.zeros_like(x), z], 1), 0.018, RESULT)
        stage.line(np.array([[0, 0, h], [0, 0, 0], [w, 0, 0]]), 0.008, INK)
        for it in _ticks(0, last):
            stage.line(np.array([[it * w / last, 0, 0], [it * w / last, 0, -0.05]]), 0.006, INK)
            stage.text(f"{it:g}", Vector((it * w / last, 0, -0.15)), 0.12, face)
        for decade in range(bottom, 1, max(1, -bottom // 6)):
            zt = (decade / -bottom + 1) * h
            stage.line(np.array([[0, 0, zt], [-0.05, 0, zt]]), 0.006, INK)
            stage.text("1" if decade == 0 else f"1e{decade}", Vector((-0.1, 0, zt)), 0.12, face, "RIGHT")
        stage.text("iteration", Vector((w / 2, 0, -0.4)), 0.14, face)
        # the legend here, on white: a collider behind the cloth's panels may reach anywhere there
        stage.text("above, blue: result    red wireframe: target", Vector((w / 2, 0, h + 0.22)), 0.12, face)
        stage.text("loss / initial loss", Vector((-0.75, 0, h / 2)), 0.14, face @ Matrix.Rotation(math.pi / 2, 3, "Z"))
        scale = 5.4
        height = int(width * 3.1 / scale)
        eye = Vector((w / 2 - 0.35, -10, h / 2 - 0.2))
        stage.render(path, eye, face, scale, width, height)


def _pixels(path):
    img = bpy.data.images.load(path)
    try:
        px = np.empty(img.size[0] * img.size[1] * 4, np.float32)
        img.pixels.foreach_get(px)
        return px.reshape(img.size[1], img.size[0], 4)
    finally:
        bpy.data.images.remove(img)


def write(path, keyframes, tris, colliders, losses):
    """The preview PNG at path: keyframes (label, frame index, target, result) above the loss curve."""
    with tempfile.TemporaryDirectory(prefix="diffcloth-preview-") as tmp:
        shots = os.path.join(tmp, "keyframes.png"), os.path.join(tmp, "loss.png")
        _keyframes(shots[0], keyframes, tris, colliders)
        top = _pixels(shots[0])
        _loss_curve(shots[1], losses, top.shape[1])
        sheet = np.concatenate([_pixels(shots[1]), top])  # Blender's rows run bottom-up
    img = bpy.data.images.new("DiffCloth Preview", sheet.shape[1], sheet.shape[0])
    try:
        img.pixels.foreach_set(sheet.ravel())
        img.filepath_raw, img.file_format = path, "PNG"
        img.save()
    finally:
        bpy.data.images.remove(img)
