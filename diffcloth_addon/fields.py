"""Blender's force fields as the cloth feels them (main thread only): Wind fields, read at every
frame, as one wind velocity for core.Scene(wind=...); fields DiffCloth does not simulate, or Wind
settings it does not follow, are named in warnings.

A Wind field of strength S blows along its object's Z axis; Blender's cloth takes it as the
velocity S/fps in its own time unit, 1/√1000 s where its cloth runs in seconds, so S·√1000/fps m/s
(core.terms.wind carries Blender's pressure over in the same units), times the cloth's Field
Weights › Wind.
"""

import math

import numpy as np


def wind_fields(scene):
    """The scene's Wind fields, and a warning per other force field or Wind setting that is not
    simulated (left out, or taken as its default)."""
    winds, warnings = [], []
    for o in scene.objects:
        field = o.field
        if field is None or field.type == "NONE":
            continue
        if field.type != "WIND":
            warnings.append(
                f"force field '{o.name}' ({field.type.title()}) is ignored: DiffCloth simulates Wind fields only"
            )
            continue
        winds.append(o)
        unfollowed = [
            name
            for name, followed in (
                ("Falloff Power", field.falloff_power == 0.0),
                ("Min Distance", not field.use_min_distance),
                ("Max Distance", not field.use_max_distance),
                ("Noise", field.noise == 0.0),
                ("Flow (taken as 1)", field.flow == 1.0),
                ("Z Direction (taken as Both)", field.z_direction == "BOTH"),
            )
            if not followed
        ]
        if unfollowed:
            warnings.append(
                f"Wind field '{o.name}': its {', '.join(unfollowed)} not followed (DiffCloth blows a Wind field "
                "the same everywhere, relative to the cloth's velocity)"
            )
    return winds, warnings


def wind_at(winds, depsgraph, fps):
    """The wind velocity (3,) in m/s the fields blow at the frame the depsgraph shows (fps: the
    scene's frame rate, which Blender divides the strength by)."""
    total = np.zeros(3)
    for o in winds:
        ev = o.evaluated_get(depsgraph)
        axis = np.array(ev.matrix_world.col[2][:3])
        total += ev.field.strength * math.sqrt(1000.0) / fps * axis / max(np.linalg.norm(axis), 1e-300)
    return total
