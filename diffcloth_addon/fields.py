"""Blender's force fields as the cloth feels them (main thread only): the fields in the scene, or
in the cloth's effector collection (Field Weights › Effector Collection), read at every frame,
each scaled by the cloth's Field Weights (All × its type).

Wind, Force, Vortex, Drag and Turbulence fields are simulated (core.Effector: Blender's formulas,
shapes, falloff, Z direction, Flow, Wind Factor; Turbulence's noise of the same size and strength,
not its pattern, which a warning says); other fields, shapes and settings are named in warnings
and left out. A Wind field that blows alike everywhere (no falloff, Flow 1, Wind Factor
1, both Z directions) is the scene's uniform wind, S·√1000/fps m/s along its Z axis (Blender's
cloth takes the strength S over fps in its time unit, 1/√1000 s in seconds), which Optimize may
scale (Wind Fields); the others are core effectors, read as they are. Each such field, as Blender
applies it, pushes by W·(S·z − v) (W: Field Weights, All × Wind), so their sum is W·ΣS·z less
W·N·v for N of them: the scene's wind and its drag κ = W·N.
"""

import math

import numpy as np

from .. import core as dc
from .reading import action_fcurves, collection_objects, evaluated, physics_objects

SIMULATED = ("WIND", "FORCE", "VORTEX", "DRAG", "TURBULENCE")
SHAPES = ("POINT", "LINE", "PLANE")
WEIGHTS = {
    "WIND": "wind_weight",
    "FORCE": "force_weight",
    "VORTEX": "vortex_weight",
    "DRAG": "drag_weight",
    "TURBULENCE": "turbulence_weight",
}


def _falloff(field):
    """The field's core.Falloff (None where a distance is not used)."""
    return dc.Falloff(
        field.falloff_type,
        field.falloff_power,
        field.distance_min if field.use_min_distance else None,
        field.distance_max if field.use_max_distance else None,
        field.radial_falloff,
        field.radial_min if field.use_radial_min else None,
        field.radial_max if field.use_radial_max else None,
        field.z_direction,
    )


def _uniform(field):
    """Whether a Wind field blows alike everywhere, relative to the cloth's velocity."""
    return (
        field.type == "WIND"
        and field.falloff_power == 0.0
        and not (field.use_max_distance or field.use_min_distance)
        and (
            field.falloff_type == "SPHERE" or not (field.radial_falloff or field.use_radial_max or field.use_radial_min)
        )
        and field.z_direction == "BOTH"
        and field.flow == 1.0
        and field.wind_factor == 1.0
    )


def _unfollowed(o):
    """A warning naming the field's settings DiffCloth leaves out, or None."""
    field = o.field
    left = [
        name
        for name, followed in (
            ("Noise", field.noise == 0.0),
            ("Absorption", not field.use_absorption),
        )
        if not followed
    ]
    # read once, at the start: only the place, the axis and the Strength follow their animation
    left += sorted(
        {
            f"animated {field.bl_rna.properties[fc.data_path[6:]].name}"
            for fc in action_fcurves(o.animation_data)
            if fc.data_path.startswith("field.")
            and fc.data_path != "field.strength"
            and fc.data_path[6:] in field.bl_rna.properties
        }
    )
    if field.type == "TURBULENCE":
        left.append("noise pattern (DiffCloth's turbulence has the same size and strength, not Blender's pattern)")
    if left:
        return f"{_shown(field, 'type')} field '{o.name}': its {', '.join(left)} not followed"
    return None


def _shown(field, setting):
    """The name Blender's panel shows for a field's setting (Lennard-Jones, Fluid Flow, Every Point)."""
    return field.bl_rna.properties[setting].enum_items[getattr(field, setting)].name


class FieldReader:
    """The fields acting on a cloth (its settings cs; those Blender evaluates at the depsgraph),
    read frame by frame (`read`), then as the scene's uniform wind (`wind`) and core effectors
    (`effectors`)."""

    def __init__(self, scene, cs, depsgraph):
        self.cs, self.fps, self.warnings = cs, scene.render.fps, []  # Blender divides by fps, not fps/fps_base
        chosen = cs.effector_collection
        # as Blender's relations: the collection's, or the view layer's enabled ones (of those,
        # what it evaluates), and not the cloth's own field
        if chosen:
            pool = collection_objects(chosen)
        else:
            enabled = physics_objects(depsgraph.view_layer)
            pool = [o for o in scene.objects if o in enabled]
        self.winds, self.fields = [], []
        for o in pool:
            if o == cs.id_data:
                continue
            self._particle_fields(o)
            field = o.field
            if field is None or field.type == "NONE" or not evaluated(o, depsgraph):
                continue
            if field.type not in SIMULATED or field.shape not in SHAPES:
                what = _shown(field, "type") if field.type not in SIMULATED else f"{_shown(field, 'shape')} shape"
                self.warnings.append(
                    f"force field '{o.name}' ({what}) is ignored: DiffCloth simulates Wind, Force, Vortex, Drag and "
                    "Turbulence fields of Point, Line or Plane shape"
                )
                continue
            # it moves nothing, as in Blender (whose falloff must be positive: a negative weight is none)
            if self._weight(field.type) <= 0.0 or not field.apply_to_location:
                continue
            (self.winds if _uniform(field) else self.fields).append(o)
            if (warning := _unfollowed(o)) is not None:
                self.warnings.append(warning)
        self.wind_frames, self.frames = [], {o.name: [] for o in self.fields}

    def _particle_fields(self, o):
        """A warning for each force field a particle system of o carries (Blender's cloth feels them)."""
        for system in getattr(o, "particle_systems", ()):
            for field in (system.settings.force_field_1, system.settings.force_field_2):
                if field is not None and field.type != "NONE":
                    self.warnings.append(
                        f"force field of particle system '{system.name}' on '{o.name}' ({_shown(field, 'type')}) is "
                        "ignored: DiffCloth simulates the fields of objects, not of particles"
                    )

    def _weight(self, kind):
        return self.cs.all_weight * getattr(self.cs, WEIGHTS[kind])

    def read(self, depsgraph):
        """Read every field at the frame the depsgraph shows."""
        total = np.zeros(3)
        for o in self.winds:
            ev = o.evaluated_get(depsgraph)
            axis = np.array(ev.matrix_world.col[2][:3])
            total += ev.field.strength * math.sqrt(1000.0) / self.fps * axis / max(np.linalg.norm(axis), 1e-300)
        self.wind_frames.append(total * self._weight("WIND"))
        for o in self.fields:
            ev = o.evaluated_get(depsgraph)
            m = ev.matrix_world
            self.frames[o.name].append((m.translation[:], m.col[2][:3], ev.field.strength))

    def wind(self):
        """The uniform wind per frame (frames, 3), or None where no Wind field blows alike."""
        return np.array(self.wind_frames) if self.winds else None

    def wind_drag(self):
        """The uniform wind's drag κ on the cloth's velocity: each of its fields' Flow (1) weighted."""
        return self._weight("WIND") * len(self.winds) if self.winds else 1.0

    def effectors(self):
        """The other fields as core.Effector, their place, axis and strength per frame."""
        out = []
        for o in self.fields:
            field = o.field
            origin, axis, strength = (np.array(a) for a in zip(*self.frames[o.name]))
            out.append(
                dc.Effector(
                    field.type,
                    origin,
                    axis,
                    strength,
                    shape=field.shape,
                    flow=field.flow,
                    damping=field.quadratic_drag,  # Blender's Drag: f_damp, linear in the speed (effect.cc)
                    falloff=_falloff(field),
                    wind_factor=field.wind_factor,
                    gravitation=field.use_gravity_falloff,
                    size=field.size,
                    global_coords=field.use_global_coords,
                    weight=self._weight(field.type),
                    fps=self.fps,
                )
            )
        return out
