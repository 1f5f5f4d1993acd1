"""Keys out of the fabric's reach, told to the artist: a warning per key in the report, the status
bar and the sidebar (core.key_reach measures them), and a colour attribute on each such target
that shows where it asks the fabric to stretch more than it does."""

import numpy as np

ATTRIBUTE = "DiffCloth Stretch"  # the targets' colour attribute: white within reach, red beyond
FULL_RED = 0.1  # strain beyond the fabric's (0.1: 10% longer than it stretches) shown fully red


def unreachable(setup, result):
    """{scene frame: KeyReach} of the keys the cloth cannot reach by stretching as it does."""
    return {f + setup.start: r for f, r in (result.reach or {}).items() if not r.reachable}


def target_of(setup, frame):
    """The name of the target keyed at scene frame `frame`."""
    return next(name for name, frames in setup.target_frames.items() if frame in frames)


def message(setup, frame, r):
    """What the artist reads about one unreachable key."""
    return (
        f"target '{target_of(setup, frame)}' at frame {frame} asks '{setup.cloth_name}' to stretch "
        f"{r.demand * 100:.0f}% (95% of its edges within {r.demand_p95 * 100:.1f}%), more than the fabric "
        f"stretches in its motion ({r.fabric * 100:.1f}%): the cloth can come no closer than about "
        f"{r.closest[0] * 1e3:.1f} mm on average ({r.closest[1] * 1e3:.0f} mm at worst); the target's "
        f"'{ATTRIBUTE}' colours show where"
    )


def stored(setup, result):
    """The unreachable keys as the cloth's stored result keeps them: {scene frame: [demand,
    demand_p95, fabric, closest mean, closest largest]}."""
    return {str(f): [r.demand, r.demand_p95, r.fabric, *r.closest] for f, r in unreachable(setup, result).items()}


def mark_targets(setup, result, objects):
    """Colour each target by how far its keys ask more stretch than the fabric has (the largest
    over its keys), and clear the colours of targets whose keys are now within reach. Targets in
    Edit Mode are left alone (leaving it would overwrite the attribute)."""
    excess = {}
    for frame, r in unreachable(setup, result).items():
        name = target_of(setup, frame)
        excess[name] = np.maximum(excess.get(name, 0.0), r.vertex_excess)
    for name in setup.target_frames:
        target = objects.get(name)
        if target is None or target.type != "MESH" or target.mode == "EDIT":
            continue
        mesh = target.data
        if mesh.color_attributes.get(ATTRIBUTE) is not None:
            mesh.color_attributes.remove(mesh.color_attributes[ATTRIBUTE])
        if name not in excess or len(excess[name]) != len(mesh.vertices):
            continue
        red = np.clip(excess[name] / FULL_RED, 0.0, 1.0)
        colours = np.column_stack([np.ones_like(red), 1.0 - red, 1.0 - red, np.ones_like(red)])
        attribute = mesh.color_attributes.new(ATTRIBUTE, "FLOAT_COLOR", "POINT")
        attribute.data.foreach_set("color", colours.astype(np.float32).ravel())
        mesh.color_attributes.active_color = attribute
        mesh.update()
