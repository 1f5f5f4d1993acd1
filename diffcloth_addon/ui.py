"""The sidebar panel: View3D › Sidebar › DiffCloth."""

import bpy

from . import convert


def _scene_summary(scene):
    """(cloths, colliders, targets with frames) and why Optimize cannot run, if it cannot."""
    objs = list(scene.objects)
    cloths = [o for o in objs if o.diffcloth.role == "CLOTH"]
    colliders = [o for o in objs if o.diffcloth.role in ("SPHERE", "PLANE")]
    targets = [(o, sorted(convert.keyed_frames(o))) for o in objs if o.diffcloth.role == "TARGET"]
    if not cloths:
        why = "No cloth: set an object's role to Cloth"
    elif len(cloths) > 1:
        why = "Several cloths: run Optimize from a script with cloth=NAME"
    elif not targets:
        why = "No targets: add one with 'New Target from Cloth'"
    elif not any(frames for _, frames in targets):
        why = "No targets with keyframes: insert a keyframe on a target"
    else:
        why = ""
    return cloths, colliders, targets, why


class DIFFCLOTH_PT_main(bpy.types.Panel):
    bl_label = "DiffCloth"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "DiffCloth"

    def draw(self, context):
        layout = self.layout
        scene = context.scene
        settings = scene.diffcloth
        obj = context.active_object
        if obj is not None:
            box = layout.box()
            box.label(text=obj.name, icon="OBJECT_DATA")
            s = obj.diffcloth
            box.prop(s, "role")
            if s.role == "CLOTH":
                for name in ("mass", "tension", "bending", "damping", "substeps", "contact_stiffness", "thickness"):
                    box.prop(s, name)
                if obj.type == "MESH":
                    box.prop_search(s, "pin_group", obj, "vertex_groups")
            elif s.role == "TARGET":
                box.prop(s, "cloth")
                box.prop(s, "weight")
                if obj.type == "MESH":
                    box.prop_search(s, "weight_group", obj, "vertex_groups")

        cloths, colliders, targets, why = _scene_summary(scene)
        box = layout.box()
        box.label(text="Colliders", icon="MESH_UVSPHERE")
        for o in colliders:
            box.label(text=f"{o.name} ({o.diffcloth.role.lower()})")
        box.label(text="Targets", icon="KEYFRAME")
        for o, frames in targets:
            box.label(text=f"{o.name}: frames {', '.join(map(str, frames)) or 'none keyed'}")

        box = layout.box()
        box.label(text="Optimize", icon="MODIFIER")
        box.prop(settings, "use_scene_range")
        if not settings.use_scene_range:
            row = box.row(align=True)
            row.prop(settings, "frame_start")
            row.prop(settings, "frame_end")
        col = box.column(align=True)
        for name in ("opt_tension", "opt_bending", "opt_velocity", "opt_velocity_per_vertex", "opt_forces", "opt_wind"):
            col.prop(settings, name)
        if settings.opt_forces or settings.opt_wind:
            box.prop(settings, "force_magnitude")
            box.prop(settings, "force_smoothness")
        box.prop(settings, "max_iterations")

        col = layout.column(align=True)
        row = col.row()
        row.enabled = not why and not settings.running
        row.operator("diffcloth.optimize", icon="PLAY")
        if why:
            col.label(text=why, icon="INFO")
        row = col.row(align=True)
        row.enabled = len(cloths) == 1 and not settings.running
        row.operator("diffcloth.simulate")
        row.operator("diffcloth.clear_bake")
        col.operator("diffcloth.new_target", icon="DUPLICATE")

        if settings.running or settings.iteration:
            box = layout.box()
            box.label(text=f"{'Running' if settings.running else 'Last run'}: {settings.status}")
            box.label(text=f"Iteration {settings.iteration}   loss {settings.loss:.4g}")
            box.label(text=f"Normalized {settings.normalized_loss:.2e}   {settings.elapsed:.1f} s")


CLASSES = (DIFFCLOTH_PT_main,)
