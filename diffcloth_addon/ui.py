"""Panels. Per object: Properties › Physics › DiffCloth, in sub-panels laid out like Blender's own
Cloth panel. Per scene, the run: 3D Viewport › Sidebar › DiffCloth (colliders, targets and their
frames, what to optimize, Optimize / Simulate / Cancel, progress and the live figures)."""

import math

import bpy
import numpy as np

from .. import core as dc
from . import proxy
from .colliders import collision_objects
from .reading import keyed_frames
from .results import RESULT_KEY, setting_result
from .settings import OWN_STIFFNESS, own_stiffness, tension_setting


def _split(layout):
    """Labels left, values right, no animation decorators: Blender's property-panel layout."""
    layout.use_property_split = True
    layout.use_property_decorate = False
    return layout


class _Physics(bpy.types.Panel):
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"


class _RolePanel(_Physics):
    """A sub-panel shown for one role."""

    bl_parent_id = "DIFFCLOTH_PT_object"
    role = ""
    props: tuple[str, ...] = ()

    @classmethod
    def poll(cls, context):
        return context.object is not None and context.object.diffcloth.role == cls.role

    def draw(self, context):
        layout = _split(self.layout)
        for name in self.props:
            layout.prop(context.object.diffcloth, name)


class DIFFCLOTH_PT_object(_Physics):
    bl_label = "DiffCloth"

    @classmethod
    def poll(cls, context):
        return context.object is not None

    def draw(self, context):
        layout = _split(self.layout)
        s = context.object.diffcloth
        layout.prop(s, "role")
        if s.role == "SPHERE":
            layout.label(text="Centre: object location; radius: farthest vertex (or empty size)", icon="INFO")
            layout.prop(s, "friction")
        elif s.role == "PLANE":
            layout.label(text="Through the object's location, normal along its local Z", icon="INFO")
            layout.prop(s, "friction")
        elif s.role == "NONE" and context.object.type == "MESH" and context.object.collision is not None:
            layout.label(text="Collides with DiffCloth cloth through its Collision physics", icon="INFO")
        elif s.role == "CLOTH" and context.object.type != "MESH":
            layout.label(text="Only a mesh can be cloth", icon="ERROR")


def fabric_name(s):
    """The preset a cloth's fabric settings match, else "Custom" (as Blender's preset menus read)."""
    for fabric in dc.FABRICS.values():
        if all(
            math.isclose(getattr(s, a), getattr(fabric, a), rel_tol=1e-6)
            for a in ("density", "stretch", "bending", "damping")
        ) and all(math.isclose(own_stiffness(s, k), getattr(fabric, k) or fabric.stretch) for k in OWN_STIFFNESS):
            return fabric.name
    return "Custom"


class DIFFCLOTH_MT_fabric_presets(bpy.types.Menu):
    bl_label = "Fabric Presets"

    def draw(self, context):
        for key, fabric in dc.FABRICS.items():
            self.layout.operator("diffcloth.fabric_preset", text=fabric.name).preset = key


class DIFFCLOTH_PT_cloth_physical(_RolePanel):
    bl_label = "Physical Properties"
    role = "CLOTH"

    def draw(self, context):
        layout = _split(self.layout)
        s = context.object.diffcloth
        layout.prop(s, "model")
        if s.model == "FABRIC":
            layout.menu("DIFFCLOTH_MT_fabric_presets", text=fabric_name(s))
            layout.prop(s, "density")
        else:
            layout.prop(s, "mass")
        for name in ("damping", "substeps", "solver"):
            layout.prop(s, name)


class DIFFCLOTH_PT_cloth_stiffness(_RolePanel):
    bl_label = "Stiffness"
    role = "CLOTH"

    def draw(self, context):
        layout = _split(self.layout)
        s = context.object.diffcloth
        layout.prop(s, tension_setting(s))
        if s.model == "FABRIC":  # Blender's order: Tension, Compression, Shear, Bending
            for key in OWN_STIFFNESS:  # ticked: a value of its own
                row = layout.row(heading=s.bl_rna.properties[key].name)
                row.prop(s, "use_" + key, text="")
                value = row.row()
                value.active = getattr(s, "use_" + key)
                value.prop(s, key, text="")
        layout.prop(s, "bending")


class DIFFCLOTH_PT_cloth_shape(_RolePanel):
    bl_label = "Shape"
    role = "CLOTH"

    def draw(self, context):
        layout = _split(self.layout)
        layout.prop_search(context.object.diffcloth, "pin_group", context.object, "vertex_groups")
        row = layout.row()
        row.active = bool(context.object.diffcloth.pin_group)
        row.prop(context.object.diffcloth, "pin_stiffness", text="Stiffness")  # Blender's Shape › Stiffness
        s = context.object.diffcloth
        layout.prop(s, "use_sewing_springs")
        row = layout.row()
        row.active = s.use_sewing_springs
        row.prop(s, "sewing_force_max")
        layout.prop(s, "shrink_min")
        layout.prop(s, "use_rest_angles")
        keys = context.object.data.shape_keys
        if keys is not None:
            layout.prop_search(s, "rest_shape_key", keys, "key_blocks")
        else:
            layout.prop(s, "rest_shape_key")


class DIFFCLOTH_PT_cloth_property_weights(_RolePanel):
    bl_label = "Property Weights"
    role = "CLOTH"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        """Blender's order; a Max is active where its group is set and it has a stiffness to raise."""
        layout = _split(self.layout)
        obj, s = context.object, context.object.diffcloth
        fabric = s.model == "FABRIC"
        for group, maxes in (
            ("structural_group", (("tension_max", True), ("compression_max", fabric and s.use_compression))),
            ("shear_group", (("shear_max", fabric and s.use_shear),)),
            ("bending_group", (("bending_max", True),)),
            ("shrink_group", (("shrink_max", True),)),
        ):
            col = layout.column()
            col.active = group != "shear_group" or (fabric and s.use_shear)
            col.prop_search(s, group, obj, "vertex_groups")
            for key, used in maxes:
                row = col.row()
                row.active = bool(getattr(s, group)) and used
                row.prop(s, key)


class DIFFCLOTH_PT_cloth_field_weights(_RolePanel):
    bl_label = "Field Weights"
    role = "CLOTH"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        layout = _split(self.layout)
        cs = context.object.diffcloth
        layout.prop(cs, "effector_collection")
        weights = ("gravity", "all", "force", "vortex", "wind", "turbulence", "drag")  # Blender's order
        for key in (f"{w}_weight" for w in weights):
            layout.prop(cs, key)
        if not context.scene.use_gravity:
            layout.label(text="Scene › Gravity is off", icon="INFO")


class DIFFCLOTH_PT_cloth_proxy(_RolePanel):
    bl_label = "Simulation Mesh"
    role, props = "CLOTH", ("sim_mesh", "proxy_vertices")

    def draw(self, context):
        _RolePanel.draw(self, context)  # not super(): tests draw panels on stand-in objects
        row = _split(self.layout).row()
        row.active = proxy.wanted(context.object.diffcloth)  # Refine follows a run through a proxy
        row.prop(context.object.diffcloth, "refine_iterations")
        self.layout.operator("diffcloth.make_proxy", icon="MOD_DECIM").cloth = context.object.name


class DIFFCLOTH_PT_cloth_collisions(_RolePanel):
    bl_label = "Collisions"
    role, props = "CLOTH", ("contact_stiffness", "thickness")


class DIFFCLOTH_PT_cloth_self_collisions(_RolePanel):
    bl_label = "Self Collisions"
    bl_parent_id = "DIFFCLOTH_PT_cloth_collisions"
    role = "CLOTH"

    def draw_header(self, context):
        self.layout.prop(context.object.diffcloth, "use_self_collision", text="")

    def draw(self, context):
        layout = _split(self.layout)
        layout.active = context.object.diffcloth.use_self_collision
        layout.prop(context.object.diffcloth, "self_distance")
        layout.prop(context.object.diffcloth, "self_friction")


class DIFFCLOTH_PT_target(_RolePanel):
    bl_label = "Target"
    role = "TARGET"

    def draw(self, context):
        layout = _split(self.layout)
        obj = context.object
        layout.prop(obj.diffcloth, "cloth")
        layout.prop(obj.diffcloth, "weight")
        if obj.type == "MESH":
            layout.prop_search(obj.diffcloth, "weight_group", obj, "vertex_groups")
        frames = sorted(keyed_frames(obj))
        layout.label(
            text=f"Keyed at {', '.join(map(str, frames))}"
            if frames
            else "No keyframes: insert one to make this pose a target",
            icon="KEYFRAME" if frames else "ERROR",
        )


class _Sidebar(bpy.types.Panel):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "DiffCloth"


class DIFFCLOTH_PT_main(_Sidebar):
    bl_label = "DiffCloth"

    def draw(self, context):
        layout = self.layout
        scene = context.scene
        state = context.window_manager.diffcloth
        objs = scene.objects
        cloths = [o for o in objs if o.diffcloth.role == "CLOTH"]
        active = context.active_object
        joint = len(cloths) > 1 and scene.diffcloth.together
        cloth = active if active in cloths else (cloths[0] if len(cloths) == 1 else None)
        col = layout.column()
        if len(cloths) > 1:
            col.prop(scene.diffcloth, "together")
        if joint:
            col.label(text=f"Cloths: {', '.join(o.name for o in cloths)}", icon="MOD_CLOTH")
        elif cloth is not None:
            col.label(text=f"Cloth: {cloth.name}", icon="MOD_CLOTH")
            cs = cloth.diffcloth
            col.label(
                text=f"    Self Collisions: {cs.self_distance * 1e3:.3g} mm, friction {cs.self_friction:g}"
                if cs.use_self_collision
                else "    Self Collisions: off"
            )
        elif cloths:
            col.label(text=f"{len(cloths)} cloths: select the one to run", icon="INFO")
        col.label(text="Colliders", icon="MESH_UVSPHERE")
        for o in objs:
            if o.diffcloth.role in ("SPHERE", "PLANE"):
                col.label(text=f"    {o.name} ({o.diffcloth.role.lower()}, friction {o.diffcloth.friction:g})")
        for o in collision_objects(scene, cloths if joint else [cloth]):
            c = o.collision
            col.label(
                text=f"    {o.name} (mesh, {sum(len(p.vertices) - 2 for p in o.data.polygons)} triangles, "
                f"friction {c.cloth_friction:g}{', single sided' if c.use_culling else ''})"
            )
        col.label(text="Targets", icon="KEYFRAME")
        for o in objs:
            if o.diffcloth.role == "TARGET":
                frames = sorted(keyed_frames(o))
                col.label(text=f"    {o.name}: {', '.join(map(str, frames)) or 'no keyframes'}")

        col = layout.column(align=True)
        col.operator("diffcloth.optimize", icon="PLAY")
        row = col.row(align=True)
        row.operator("diffcloth.simulate", icon="PHYSICS")
        row.operator("diffcloth.clear_bake", icon="X")
        col.operator("diffcloth.new_target", icon="DUPLICATE")
        if state.running:
            box = layout.box()
            if hasattr(box, "progress"):  # UILayout.progress: Blender 4.0+
                box.progress(factor=state.progress, text=f"{state.kind}: {state.status}")
            else:
                box.label(text=f"{state.kind}: {state.status}")
            box.operator("diffcloth.cancel", icon="CANCEL")
        if state.kind:
            box = layout.box()
            box.label(text=f"{'Running' if state.running else 'Last run'}: {state.kind}, {state.status}")
            if state.kind == "Optimize":
                box.label(text=f"Iteration {state.iteration}   loss {state.loss:.4g}")
                box.label(text=f"{state.normalized_loss:.2e} of the start loss")
            box.label(text=f"{state.elapsed:.1f} s")
        if cloth is not None and cloth.get(RESULT_KEY):
            _draw_result(layout.box(), cloth, cloth[RESULT_KEY])


def _draw_result(box, cloth, stored):
    """The optimized design kept on the cloth, beside the artist's own settings."""
    box.label(text="Optimized (used by Simulate)", icon="CHECKMARK")
    box.label(text=f"Loss {stored['initial_loss']:.4g} → {stored['loss']:.4g}, {stored['iterations']} iterations")
    if stored.get("refined"):
        box.label(text="Refined on the cloth itself: simulated without its simulation mesh", icon="INFO")
    for frame, (mean0, max0, mean1, max1) in stored.get("keyframes", {}).items():
        box.label(
            text=f"Frame {frame}: {mean0 * 1e3:.1f} → {mean1 * 1e3:.1f} mm (largest {max0 * 1e3:.1f} → "
            f"{max1 * 1e3:.1f})"
        )
    for frame, (demand, _, fabric, mean, largest, inside, deepest, *slid) in stored.get("unreachable", {}).items():
        col = box.column(align=True)
        col.label(text=f"Frame {frame}: out of the cloth's reach", icon="ERROR")
        if largest > 0:
            col.label(text=f"    asks {demand * 100:.0f}% stretch, the fabric shows {fabric * 100:.1f}%")
            col.label(text=f"    no closer than ~{mean * 1e3:.1f} mm ({largest * 1e3:.0f} mm at worst)")
        if inside:
            col.label(text=f"    {inside} vertices inside colliders, up to {deepest * 1e3:.0f} mm")
        if slid and slid[0]:  # (results stored before slides were measured have none)
            col.label(text=f"    {slid[0]} vertices slide off at rest, up to {slid[1] * 1e3:.0f} mm")
    cs = cloth.diffcloth
    setting = tension_setting(cs)
    for key, name, mine, value in (
        ("k_tension", setting.title(), getattr(cs, setting), setting_result(stored, "k_tension")),
        ("k_bending", "Bending", cs.bending, setting_result(stored, "k_bending")),
    ):
        if value is None:
            box.label(text=f"{name}: per element ({len(stored[key])} values)")
        elif not math.isclose(value, mine, rel_tol=1e-6):
            box.label(text=f"{name}: {value:.4g} (yours {mine:.4g})")
    if np.any(np.asarray(stored["v0"])):
        box.label(text="Initial velocities")
    if "forces" in stored.keys():
        box.label(text=f"Control forces: {stored['max_control_acceleration'] / 9.81:.2f} g at most")
    if "pin_offset" in stored.keys():
        moved = np.linalg.norm(np.asarray(stored["pin_offset"]).reshape(-1, 3), axis=1).max()
        box.label(text=f"Pins moved (Move Pins): up to {moved * 100:.1f} cm")
    if "wind_scale" in stored.keys():
        box.label(text=f"Wind fields: {stored['wind_scale']:.3g}× as strong")
    if "friction_scale" in stored.keys():
        box.label(text=f"Colliders' friction: {stored['friction_scale']:.3g}×")
    row = box.row(align=True)
    row.operator("diffcloth.apply_result")
    row.operator("diffcloth.discard_result")


class DIFFCLOTH_PT_optimize(_Sidebar):
    bl_label = "What May Change"
    bl_parent_id = "DIFFCLOTH_PT_main"

    def draw(self, context):
        layout = _split(self.layout)
        settings = context.scene.diffcloth
        col = layout.column(heading="Optimize", align=True)
        for name in (
            "opt_tension",
            "opt_bending",
            "opt_velocity",
            "opt_velocity_per_vertex",
            "opt_forces",
            "opt_wind",
            "opt_wind_fields",
            "opt_friction",
        ):
            col.prop(settings, name)
        if settings.opt_forces:
            layout.prop(settings, "force_basis")
            if settings.force_basis == "KEYS":
                layout.prop(settings, "force_key_spacing")
                layout.prop(settings, "force_move_pins")
        if settings.opt_forces or settings.opt_wind:
            layout.prop(settings, "force_strength")
            layout.prop(settings, "force_change")
        layout.prop(settings, "max_iterations")
        layout.prop(settings, "stop_within")
        layout.prop(settings, "use_scene_range")
        if not settings.use_scene_range:
            col = layout.column(align=True)
            col.prop(settings, "frame_start")
            col.prop(settings, "frame_end", text="End")


CLASSES = (
    DIFFCLOTH_MT_fabric_presets,
    DIFFCLOTH_PT_object,
    DIFFCLOTH_PT_cloth_physical,
    DIFFCLOTH_PT_cloth_stiffness,
    DIFFCLOTH_PT_cloth_shape,
    DIFFCLOTH_PT_cloth_property_weights,
    DIFFCLOTH_PT_cloth_field_weights,
    DIFFCLOTH_PT_cloth_proxy,
    DIFFCLOTH_PT_cloth_collisions,
    DIFFCLOTH_PT_cloth_self_collisions,
    DIFFCLOTH_PT_target,
    DIFFCLOTH_PT_main,
    DIFFCLOTH_PT_optimize,
)
