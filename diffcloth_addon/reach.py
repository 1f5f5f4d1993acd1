"""Keys out of the fabric's reach, told to the artist: a warning per key in the report, the status
bar and the sidebar (core.key_reach measures them), and a colour attribute on each such target
that shows where it asks the fabric to stretch more than it does (red), puts the cloth inside a
collider (blue) or rests it on one where friction cannot hold it (orange)."""

import numpy as np

from ..core.design.reach import RELEASE_FRAMES

ATTRIBUTE = "DiffCloth Reach"  # the targets' colour attribute: white within reach
FULL_RED = 0.1  # strain beyond the fabric's (0.1: 10% longer than it stretches) shown fully red


def unreachable(setup, result):
    """{scene frame: KeyReach} of the keys the cloth cannot reach by stretching as it does."""
    return {f + setup.start: r for f, r in (result.reach or {}).items() if not r.reachable}


def unreachable_keys(setup):
    """(the cloth's Setup, scene frame, KeyReach) of every key out of reach, over the cloths a
    finished run wrote (setup.written)."""
    return [(part, frame, r) for part, res in setup.written for frame, r in unreachable(part, res).items()]


def target_of(setup, frame):
    """The name of the target keyed at scene frame `frame`."""
    return next(name for name, frames in setup.target_frames.items() if frame in frames)


def message(setup, frame, r):
    """What the artist reads about one unreachable key: the stretch it asks, the colliders it
    goes into."""
    parts = []
    if r.closest[1] > 0:
        parts.append(
            f"asks '{setup.cloth_name}' to stretch {r.demand * 100:.0f}% (95% of its edges within "
            f"{r.demand_p95 * 100:.1f}%), more than the fabric stretches in its motion ({r.fabric * 100:.1f}%): "
            f"the cloth can come no closer than about {r.closest[0] * 1e3:.1f} mm on average "
            f"({r.closest[1] * 1e3:.0f} mm at worst)"
        )
    for c, (count, depth) in r.inside.items():
        parts.append(
            f"puts {count} vertices of '{setup.cloth_name}' up to {depth * 1e3:.0f} mm inside "
            f"'{setup.collider_names[c]}', where the cloth cannot go"
        )
    for c, (count, farthest) in r.slides.items():
        parts.append(
            f"rests {count} vertices of '{setup.cloth_name}' on '{setup.collider_names[c]}' where friction "
            f"cannot hold them: placed at rest in this pose, they slide up to {farthest * 1e3:.0f} mm "
            f"within {RELEASE_FRAMES} frames, so the cloth can only pass through it moving"
        )
    return (
        f"target '{target_of(setup, frame)}' at frame {frame} "
        + "; it ".join(parts)
        + f"; the target's '{ATTRIBUTE}' colours show where"
    )


def stored(setup, result):
    """The unreachable keys as the cloth's stored result keeps them: {scene frame: [demand,
    demand_p95, fabric, closest mean, closest largest, vertices inside colliders, deepest,
    vertices that slide, farthest]}."""
    return {
        str(f): [r.demand, r.demand_p95, r.fabric, *r.closest, *_total(r.inside), *_total(r.slides)]
        for f, r in unreachable(setup, result).items()
    }


def _total(per_collider):
    """How many vertices over the colliders, and the largest distance (m)."""
    found = list(per_collider.values())
    return sum(c for c, _ in found), max((d for _, d in found), default=0.0)


def mark_targets(setup, result, objects):
    """Colour each target where its keys ask more stretch than the fabric has (red, fully at
    FULL_RED more), put the cloth inside a collider (blue) or rest it where friction cannot hold
    it (orange), the most over its keys, and clear the colours of targets whose keys are now
    within reach. Targets in Edit Mode are left alone (leaving it would overwrite the attribute)."""
    red, blue, orange = {}, {}, {}
    for frame, r in unreachable(setup, result).items():
        name = target_of(setup, frame)
        red[name] = np.maximum(red.get(name, 0.0), np.clip(r.vertex_excess / FULL_RED, 0.0, 1.0))
        blue[name] = np.maximum(blue.get(name, 0.0), r.vertex_inside.astype(float))
        orange[name] = np.maximum(orange.get(name, 0.0), r.vertex_slides.astype(float))
    for name in setup.target_frames:
        target = objects.get(name)
        if target is None or target.type != "MESH" or target.mode == "EDIT":
            continue
        mesh = target.data
        if mesh.color_attributes.get(ATTRIBUTE) is not None:
            mesh.color_attributes.remove(mesh.color_attributes[ATTRIBUTE])
        if name not in red or len(red[name]) != len(mesh.vertices):
            continue
        r, b, o = red[name], blue[name], orange[name]
        colours = np.column_stack(
            [1.0 - b, 1.0 - np.maximum.reduce([r, b, 0.5 * o]), 1.0 - np.maximum(r, o), np.ones_like(r)]
        )
        attribute = mesh.color_attributes.new(ATTRIBUTE, "FLOAT_COLOR", "POINT")
        attribute.data.foreach_set("color", colours.astype(np.float32).ravel())
        mesh.color_attributes.active_color = attribute
        mesh.update()
