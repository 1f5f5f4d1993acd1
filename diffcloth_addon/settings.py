"""The panel's settings as core's parameters: the cloth, the scene checked against what its solver
simulates right, and the quantities an optimization varies."""

import math

import numpy as np

from .. import core as dc
from ..core.model import scene as scene_model
from .errors import InputError

# Optimize converges every step whatever the cloth's Solver: a linearized step's motion over
# colliders is chaotic, its exact gradients grow ×10⁴ in two seconds and no optimizer gets far
# (docs/solver.md), while the converged step's stay of the order of the motion
OPTIMIZE_SOLVER = "newton"


def build_cloth(cs, verts, tris, pins, polygons, factors=None, sewing=None):
    """The core Cloth of a cloth's settings: a fabric in physical units, or springs (older files).
    polygons: the face of each triangle, so that the quads' diagonals are shear springs; factors:
    the Property Weights' per-vertex stiffness factors (property_factors); sewing: the vertex
    pairs its loose edges join, sewn with a typical edge's stiffness as Blender's, their force
    capped at Max Sewing Force."""
    if cs.model == "FABRIC":
        cloth = fabric(cs).cloth(verts, tris, pinned=pins, polygons=polygons)
    else:
        cloth = dc.Cloth(
            verts,
            tris,
            mass=cs.mass,
            k_tension=cs.tension,
            k_bending=cs.bending,
            damping=cs.damping,
            pinned=pins,
            polygons=polygons,
        )
    if cs.use_rest_angles:
        cloth = cloth.replace(rest_angles=True)
    factors = dict(factors or {})
    shrink = factors.pop("shrink", None)
    cloth = cloth.weighted(**factors) if factors else cloth
    if shrink is not None:
        cloth = cloth.replace(shrink=shrink)
    if sewing is not None and len(sewing):
        cloth = cloth.replace(sewing=sewing, k_sewing=None, sewing_force=cs.sewing_force_max)
    return cloth


# Property Weights: per stiffness Cloth.weighted varies, its vertex group and its Max
WEIGHTED = {
    "tension": ("structural_group", "tension_max"),
    "compression": ("structural_group", "compression_max"),
    "shear": ("shear_group", "shear_max"),
    "bending": ("bending_group", "bending_max"),
}


# the Property Weights' vertex group settings
GROUPS = ("structural_group", "shear_group", "bending_group", "shrink_group")


def property_factors(cs, name, weights, n):
    """Cloth.weighted's per-vertex factors 1 + wᵢ·(max/base − 1) from the Property Weights
    (weights: per group setting, its vertex group's weights, over n vertices), and a warning per
    Max below the stiffness it would raise (Blender keeps Max at least the stiffness); Compression
    and Shear unticked are the stretch stiffness, weights included. "shrink": Cloth's shrink
    factors, where the cloth shrinks."""
    own = {k: cs.model == "FABRIC" and getattr(cs, "use_" + k) for k in OWN_STIFFNESS}
    base = {"tension": getattr(cs, tension_setting(cs)), "compression": cs.compression, "shear": cs.shear}
    base["bending"] = cs.bending
    factors, warnings = {}, []
    for kind, (group, top) in WEIGHTED.items():
        w = weights.get(group)
        if w is None or not own.get(kind, True):
            continue
        if getattr(cs, top) < base[kind]:
            names = cs.bl_rna.properties
            stiffness = names[tension_setting(cs) if kind == "tension" else kind].name
            warnings.append(
                f"cloth '{name}': {names[top].name} {getattr(cs, top):.4g} is below its {stiffness} "
                f"{base[kind]:.4g}: {names[group].name} '{getattr(cs, group)}' changes nothing there"
            )
            continue
        factors[kind] = 1.0 + w * (getattr(cs, top) / base[kind] - 1.0)
    if "tension" in factors and not own["shear"]:
        factors["shear"] = factors["tension"]
    # Shrinking: each vertex's rest lengths scaled by 1 − lerp(Shrinking Factor, Max Shrinking, w)
    w = weights.get("shrink_group", 0.0)
    if cs.shrink_min or (np.any(w) and cs.shrink_max != cs.shrink_min):
        most = max(cs.shrink_max, cs.shrink_min)  # Blender keeps Max Shrinking at least the factor
        factors["shrink"] = np.broadcast_to(1.0 - (cs.shrink_min + w * (most - cs.shrink_min)), (n,)).copy()
    return factors, warnings


def fabric(cs):
    """The core Fabric of a cloth's settings: Compression and Shear unticked (or equal to the Stretch
    Stiffness, as in Blender's presets) are the stretch stiffness itself, one design field for all."""
    own = {k: getattr(cs, k) for k in OWN_STIFFNESS if own_stiffness(cs, k) != cs.stretch}
    return dc.Fabric(cs.density, cs.stretch, cs.bending, cs.damping, **own)


# the stiffnesses a fabric may set apart from its stretch (ticked use_*)
OWN_STIFFNESS = ("compression", "shear")


def own_stiffness(cs, key):
    """A fabric's compression or shear stiffness: its own where ticked, else the stretch stiffness."""
    value = getattr(cs, key) if getattr(cs, "use_" + key) else cs.stretch
    return cs.stretch if math.isclose(value, cs.stretch) else value


# the panel's names of what core's BoundsError names (core.model.scene.API_NAMES)
PANEL_NAMES = {
    "bending": "Bending Stiffness",
    "stretch": "Stretch Stiffness",
    "compression": "Compression Stiffness",
    "shear": "Shear Stiffness",
    "density": "Density",
    "tension": "Tension Stiffness",
    "mass": "Mass",
    "contact": "Contact Stiffness",
    "substeps": "Substeps",
    "linearized": "the Linearized solver",
    "newton": "the Converged solver",
}


def build_scene(name, cloth, **kw):
    """The core Scene of cloth `name`, checked by bounded."""
    return bounded(name, dc.Scene(cloth, bounds=False, **kw))


def bounded(name, scene):
    """scene, if its settings are within what its solver simulates right (core's check_bounds), else
    an InputError naming the setting by its name on the panel: before the run, with whatever solver
    the run takes (Optimize converges every step, whatever the preview's Solver)."""
    try:
        scene_model.check_bounds(scene)
    except scene_model.BoundsError as err:
        raise InputError(f"cloth '{name}': {err.message(PANEL_NAMES)}") from None
    return scene


def tension_setting(cs):
    """The setting that scales the tension springs: Stretch Stiffness (fabric) or Tension Stiffness."""
    return "stretch" if cs.model == "FABRIC" else "tension"


def self_distance(cs, name, cloth, mesh="its simulated"):
    """The cloth's self distance (0: Self Collisions off), refused by name beyond what the mesh
    simulated (the Simulation Mesh's, or the cloth's own for Refine) allows."""
    if not cs.use_self_collision:
        return 0.0
    limit = dc.max_self_distance(cloth)
    if cs.self_distance > limit:
        raise InputError(
            f"cloth '{name}': Self Collisions Distance {cs.self_distance * 1e3:.3g} mm is more than {mesh} "
            f"mesh allows ({limit * 1e3:.3g} mm, twice its shortest edge): lower it"
            + (", or simulate through a coarser Simulation Mesh" if mesh == "its simulated" else ", or Refine 0")
        )
    return cs.self_distance


def params_from_settings(settings, setup):
    """The parameterizations the artist ticked."""
    params = []
    # cloths run together: each keyed one its own stiffness and velocity, control forces on the
    # keyed ones; the others kept as they are
    parts = getattr(setup, "parts", None)  # a Refine is of one cloth
    keyed = None if not parts else [i for i, p in enumerate(parts) if p.loss is not None] or None
    if settings.opt_tension or settings.opt_bending:
        params.append(dc.GlobalStiffness(tension=settings.opt_tension, bending=settings.opt_bending, cloths=keyed))
    if settings.opt_velocity_per_vertex:
        params.append(dc.InitialVelocity(per_vertex=True, cloths=keyed))
    elif settings.opt_velocity:
        params.append(dc.InitialVelocity(cloths=keyed))
    # the costs are distances off a key; per-frame forces sum over frames instead of integrating
    # over time, so their weights take the frame time in
    strength, change = (dc.weight_for_distance(d) for d in (settings.force_strength, settings.force_change))
    dt = setup.scene.dt
    if settings.opt_forces and settings.force_basis == "KEYS":
        forces = dc.KeyedForces(
            settings.force_key_spacing,
            strength,
            change,
            move_pins=setup.posed_pins if settings.force_move_pins else False,
            cloths=keyed,
        )
        try:
            forces.size(setup.scene)
        except ValueError as err:
            raise InputError(f"Force Key Spacing: {str(err).split(': ', 1)[1]}") from None
        params.append(forces)
    elif settings.opt_forces:
        params.append(dc.ControlForces(strength * dt, change / dt, cloths=keyed))
    if settings.opt_wind:
        params.append(dc.Wind(strength * dt, change / dt))
    if settings.opt_wind_fields:
        if setup.scene.wind is None:
            raise InputError(
                "Wind Fields: no Wind force field blows alike over the cloth (one with falloff, or Flow or Wind "
                "Factor other than 1, is simulated as it is, not optimized)"
            )
        params.append(dc.WindStrength())
    if settings.opt_friction:
        friction = dc.FrictionScale()
        try:
            friction.initial(setup.scene)
        except ValueError:
            raise InputError(
                "Friction: no collider has Friction above 0 to scale (give the colliders the cloth slides on some)"
            ) from None
        params.append(friction)
    if not params:
        raise InputError("nothing to optimize: tick at least one quantity under 'Optimize'")
    return params


def setting_value(setup, key, k):
    """The cloth's setting that makes these values of key ("k_tension": Stretch or Tension Stiffness,
    "k_bending": Bending Stiffness), or 0 if no single value does: an optimization scales them
    together from the setting's, Property Weights included, or varies them apart."""
    ratio = k / getattr(setup.scene.cloth, key)
    if np.ptp(ratio) > 1e-9 * ratio.mean():
        return 0.0
    cs = setup.cloth_obj.diffcloth
    return float(getattr(cs, tension_setting(cs) if key == "k_tension" else "bending") * ratio.mean())
