"""Settings saved in the .blend: an object's DiffCloth role and the scene's optimization setup."""

import bpy
from bpy.props import BoolProperty, EnumProperty, FloatProperty, IntProperty, PointerProperty, StringProperty

ROLES = [
    ("NONE", "None", "Not part of the DiffCloth setup"),
    ("CLOTH", "Cloth", "A mesh simulated as mass-spring cloth"),
    ("SPHERE", "Sphere Collider", "Collides as a sphere: world location, radius from its size"),
    ("PLANE", "Plane Collider", "Collides as an infinite plane: world location, local Z axis as normal"),
    ("TARGET", "Target", "A posed copy of the cloth; every keyframed frame is a target pose"),
]


def _is_cloth(self, obj):
    return obj.type == "MESH" and obj.diffcloth.role == "CLOTH"


# The bpy 4.2 module crashes at interpreter exit once a registered PropertyGroup holds a Python
# function (a poll, a method), even after unregistering it; 4.5 and 5.x do not (4.3 and 4.4 are
# untested). So these classes hold no methods, and the poll is left out on 4.2: the target's cloth
# list then shows every object, and gather() still refuses one that is not a cloth.
_CLOTH_POLL = {"poll": _is_cloth} if bpy.app.version >= (4, 5, 0) else {}


# the settings' layout version: files saved before 2 (settings_version 0) hold springs, not
# fabric; before 3, Self Collisions had no friction; before 4, pins were outright above weight 0.5
SETTINGS_VERSION = 4
# what older files' cloths had where they left a setting at its default then
LEGACY_DEFAULTS = {"bending": 1e-4, "damping": 0.0}


def _stiffness(name, description):
    """A fabric's in-plane stiffness in N/m, Cotton's by default."""
    return FloatProperty(name=name, description=description, default=90.0, min=1e-3, soft_max=1e5)


def _group(name, does):
    """A Property Weights vertex group: what its weights do (toward its Max)."""
    return StringProperty(name=name, description=f"Vertex group whose weights {does}")


def _use(what):
    """The tick that gives `what` a stiffness of its own."""
    return BoolProperty(
        name=f"{what.title()} Stiffness",
        description=f"Give {what} a stiffness of its own; unticked, the Stretch Stiffness",
        default=False,
    )


def _field_weight(name, fields):
    """A Field Weights factor, as Blender's Cloth › Field Weights › name."""
    return dict(
        name=name,
        description=f"The share of {fields} that acts on the cloth, as Blender's Cloth › Field Weights › {name}",
        default=1.0,
        min=-200.0,
        max=200.0,
        soft_min=0.0,
        soft_max=1.0,
    )


class DiffClothObjectSettings(bpy.types.PropertyGroup):
    role: EnumProperty(name="Role", items=ROLES, default="NONE", description="What this object is to DiffCloth")
    # cloth
    model: EnumProperty(
        name="Material",
        description="How the cloth's material is given",
        items=[
            (
                "FABRIC",
                "Fabric",
                "Physical units, the same cloth at any mesh resolution: areal density, stretch stiffness, "
                "bending rigidity (presets as Blender's cloth presets)",
            ),
            (
                "SPRINGS",
                "Springs",
                "As in older DiffCloth files: the cloth's total mass and a stiffness per edge spring",
            ),
        ],
        default="FABRIC",
    )
    density: FloatProperty(
        name="Density",
        description="Mass per area (kg/m²): cotton shirting 0.1–0.2, denim 0.3–0.5, leather about 1",
        default=0.15,
        min=1e-4,
        soft_max=5.0,
        precision=3,
    )
    stretch: _stiffness(
        "Stretch Stiffness",
        "Force per unit width per unit strain (N/m): how much the fabric resists stretching, the same at "
        "any mesh resolution",
    )
    # unticked, each is the Stretch Stiffness (as in Blender's presets, and in files from before them)
    use_compression: _use("compression")
    compression: _stiffness(
        "Compression Stiffness",
        "How much the fabric resists compression (N/m), as Stretch Stiffness resists stretching; lower, "
        "the fabric shortens in plane before it buckles",
    )
    use_shear: _use("shear")
    shear: _stiffness(
        "Shear Stiffness",
        "How much the fabric resists shearing (N/m): the stiffness of the diagonal across each quad (a mesh "
        "of triangles has none)",
    )
    mass: FloatProperty(name="Mass", description="Total mass of the cloth", default=0.5, min=1e-6, unit="MASS")
    tension: FloatProperty(
        name="Tension Stiffness",
        description="Stiffness of every edge spring (N/m); a sheet of springs stretches the same at any resolution",
        default=20.0,
        min=1e-6,
        soft_max=1e4,
    )
    bending: FloatProperty(
        name="Bending Stiffness",
        description="Bending rigidity (N·m): resistance to folding "
        "(5e-6: cotton, 1e-3: denim); one value drapes alike at any mesh resolution",
        default=5e-6,
        min=1e-9,
        soft_max=0.1,
        precision=7,
        step=0.001,
    )
    damping: FloatProperty(
        name="Air Damping", description="Mass-proportional damping (1/s)", default=1.0, min=0.0, soft_max=10.0
    )
    solver: EnumProperty(
        name="Solver",
        description="How each implicit Euler step is solved",
        items=[
            (
                "LINEARIZED",
                "Linearized",
                "One linear solve a step (as Blender's cloth): fast at any stiffness, never fails",
            ),
            (
                "NEWTON",
                "Converged",
                "Newton's method to convergence: exact implicit Euler, slower on stiff or buckling cloth",
            ),
        ],
        default="LINEARIZED",
    )
    sim_mesh: PointerProperty(
        name="Simulation Mesh",
        type=bpy.types.Object,
        description="A low-resolution mesh covering the cloth that is simulated in its place; the "
        "cloth follows it (as with Surface Deform), and targets, loss and bake stay on the cloth",
    )
    proxy_vertices: IntProperty(
        name="Proxy Vertices",
        description="Simulate a proxy of about this many vertices made "
        "from the cloth (Decimate) instead of the cloth itself; 0: the cloth itself. A Simulation "
        "Mesh takes precedence",
        default=0,
        min=0,
        soft_max=5000,
    )
    refine_iterations: IntProperty(
        name="Refine",
        description="After optimizing through the simulation mesh, this many more iterations on the "
        "cloth itself, from the design found (slow: each simulates the full cloth). The result is "
        "then the cloth's own: later runs simulate the cloth itself until Discard Result. 0: off",
        default=0,
        min=0,
        soft_max=20,
    )
    settings_version: IntProperty(default=0, options={"HIDDEN"})
    pin_group: StringProperty(
        name="Pin Group",
        description="Vertex group of pinned vertices: they follow the object's animation instead of the simulation",
    )
    # Property Weights, as Blender's: a vertex group raises a stiffness from its setting (weight 0)
    # to its Max (weight 1), each spring by the mean of its two ends' weights
    structural_group: _group(
        "Structural Group",
        "raise the Stretch (Tension) and Compression Stiffness toward Max Tension and Max Compression",
    )
    tension_max: _stiffness("Max Tension", "Stretch (Tension) Stiffness at weight 1 of the Structural Group (N/m)")
    compression_max: _stiffness(
        "Max Compression", "Compression Stiffness at weight 1 of the Structural Group (N/m), where ticked"
    )
    shear_group: _group(
        "Shear Group",
        "raise the Shear Stiffness toward Max Shearing (where Shear Stiffness is ticked; unticked, shear follows "
        "the Structural Group)",
    )
    shear_max: _stiffness("Max Shearing", "Shear Stiffness at weight 1 of the Shear Group (N/m)")
    bending_group: _group("Bending Group", "raise the Bending Stiffness toward Max Bending")
    use_sewing_springs: BoolProperty(
        name="Sewing",
        description="Sew the vertices the cloth's loose edges join: each pulled to the other by a spring, as "
        "Blender's Sewing (off: loose edges are refused)",
        default=False,
    )
    sewing_force_max: FloatProperty(
        name="Max Sewing Force",
        description="The most a sewing spring pulls (N); 0: no limit",
        default=0.0,
        min=0.0,
        soft_max=10.0,
    )
    shrink_group: _group("Shrinking Group", "shrink the cloth from its Shrinking Factor toward Max Shrinking")
    shrink_min: FloatProperty(
        name="Shrinking Factor",
        description="How much the cloth's springs shrink (0.1: their rest lengths 10% shorter; negative: "
        "they grow), as Blender's Shape › Shrinking Factor",
        default=0.0,
        max=0.99,
        soft_min=-1.0,
    )
    use_rest_angles: BoolProperty(
        name="Rest Angles",
        description="Bend about the mesh's own angles as modelled, as Blender's Angular bending does, so a collar "
        "or a skirt modelled round keeps its shape (off: about flat; on, a garment's quick steps take about twice "
        "the time)",
        default=False,
    )
    rest_shape_key: StringProperty(
        name="Rest Shape Key",
        description="The shape key whose shape is the cloth's rest (its springs' lengths and its bending angles), "
        "the cloth starting as the mesh is, as Blender's Cloth › Shape › Rest Shape Key (none: the mesh at the "
        "start frame)",
    )
    shrink_max: FloatProperty(
        name="Max Shrinking",
        description="The shrinking at weight 1 of the Shrinking Group (at least the Shrinking Factor)",
        default=0.0,
        max=0.99,
        soft_min=-1.0,
    )
    bending_max: FloatProperty(
        name="Max Bending",
        description="Bending Stiffness at weight 1 of the Bending Group (N·m)",
        default=5e-6,
        min=1e-9,
        soft_max=0.1,
        precision=7,
        step=0.001,
    )
    pin_stiffness: FloatProperty(
        name="Pin Stiffness",
        description="How hard a pin group's partial weights pull their vertices to where the group holds "
        "them (N/m per kg of the vertex, times its weight⁴, as Blender's pin springs); weight 1 pins outright",
        default=1000.0,
        min=1e-3,
        soft_max=1e6,
    )
    # files from before soft pins: pinned outright above weight 0.5, nowhere softly
    legacy_pins: BoolProperty(default=False, options={"HIDDEN"})
    gravity_weight: FloatProperty(
        name="Gravity",
        description="How much of the scene's gravity (Scene › Gravity) acts on the cloth, as Blender's "
        "Cloth › Field Weights › Gravity",
        default=1.0,
        min=-200.0,
        max=200.0,
        soft_min=0.0,
        soft_max=1.0,
    )
    all_weight: FloatProperty(**_field_weight("All", "every force field (times its own weight)"))
    force_weight: FloatProperty(**_field_weight("Force", "the scene's Force fields"))
    vortex_weight: FloatProperty(**_field_weight("Vortex", "the scene's Vortex fields"))
    wind_weight: FloatProperty(**_field_weight("Wind", "the scene's Wind fields"))
    turbulence_weight: FloatProperty(**_field_weight("Turbulence", "the scene's Turbulence fields"))
    drag_weight: FloatProperty(**_field_weight("Drag", "the scene's Drag fields"))
    effector_collection: PointerProperty(
        name="Effector Collection",
        type=bpy.types.Collection,
        description="Only the force fields in this collection act on the cloth (none: every field in the scene), "
        "as Blender's Cloth › Field Weights › Effector Collection",
    )
    substeps: IntProperty(name="Substeps", description="Implicit Euler steps per frame", default=1, min=1, max=64)
    contact_stiffness: FloatProperty(
        name="Contact Stiffness",
        description="Penalty stiffness per kilogram "
        "(N/m per kg) pushing vertices out of colliders: the cloth sinks 9.81 m/s² "
        "divided by it under its own weight (100000: 0.1 mm), at any mesh resolution",
        default=1e5,
        min=1.0,
        soft_max=1e8,
    )
    thickness: FloatProperty(
        name="Thickness", description="Distance kept from colliders", default=0.0, min=0.0, unit="LENGTH"
    )
    use_self_collision: BoolProperty(
        name="Self Collisions",
        description="Keep the cloth from passing through itself where it folds (as Blender's Self "
        "Collisions; costs several times the run without)",
        default=False,
    )
    self_distance: FloatProperty(
        name="Distance",
        description="Distance the cloth keeps from itself (Blender's Self Collisions Distance); at "
        "most twice the simulated mesh's shortest edge",
        default=0.015,
        min=0.001,
        soft_max=0.1,
        unit="LENGTH",
    )
    self_friction: FloatProperty(
        name="Friction",
        description="Friction between the cloth's layers where they touch, as Blender's Self "
        "Collisions Friction: the Coulomb coefficient × 100 (5: μ = 0.05)",
        default=5.0,
        min=0.0,
        soft_max=80.0,
    )
    # sphere and plane colliders
    friction: FloatProperty(
        name="Friction",
        description="Friction of the cloth on this collider, as Blender's "
        "Collision Friction: the Coulomb coefficient × 100 (30: μ = 0.3)",
        default=5.0,
        min=0.0,
        soft_max=80.0,
    )
    # target
    weight: FloatProperty(name="Weight", description="How much this target counts", default=1.0, min=0.0)
    weight_group: StringProperty(
        name="Weight Group", description="Optional vertex group weighting how much each vertex counts"
    )
    cloth: PointerProperty(
        name="Cloth",
        type=bpy.types.Object,
        **_CLOTH_POLL,
        description="The cloth this target poses (empty: the scene's only cloth)",
    )


class DiffClothSceneSettings(bpy.types.PropertyGroup):
    use_scene_range: BoolProperty(
        name="Scene Frame Range",
        description="Simulate over the scene's frame range (off: DiffCloth's own Start and End)",
        default=True,
    )
    frame_start: IntProperty(name="Start", description="First frame: the cloth's rest pose", default=1)
    frame_end: IntProperty(name="End", description="Last simulated frame", default=100)
    together: BoolProperty(
        name="Cloths Together",
        description="Simulate and optimize every cloth of the scene in one run, colliding with one another "
        "(off: the active cloth alone, the others colliding as baked where they have Collision physics)",
        default=True,
    )
    # what may change
    opt_tension: BoolProperty(
        name="Tension Stiffness", description="Optimize the cloth's tension stiffness", default=True
    )
    opt_bending: BoolProperty(
        name="Bending Stiffness", description="Optimize the cloth's bending stiffness", default=False
    )
    opt_velocity: BoolProperty(
        name="Initial Velocity", description="One initial velocity for the whole cloth", default=False
    )
    opt_velocity_per_vertex: BoolProperty(
        name="Per-Vertex Velocity", description="An initial velocity for every vertex (a throw, a flick)", default=False
    )
    opt_forces: BoolProperty(name="Control Forces", description="A steering force per vertex and frame", default=False)
    opt_wind: BoolProperty(name="Wind", description="A uniform acceleration per frame", default=False)
    opt_wind_fields: BoolProperty(
        name="Wind Fields",
        description="How hard the scene's Wind fields blow: one factor on their strength, their gusts and "
        "direction kept (Apply: a factor on the cloth's Field Weights › Wind)",
        default=False,
    )
    opt_friction: BoolProperty(
        name="Friction",
        description="How much the cloth slides: one factor on the Friction of every collider that has "
        "some, their proportions kept (Apply: the colliders' Friction)",
        default=False,
    )
    force_basis: EnumProperty(
        name="Force Basis",
        description="How control forces may vary in time",
        items=[
            (
                "KEYS",
                "Keys",
                "Smooth forces, linear between keys a Force Key Spacing apart: few unknowns, quick to converge",
            ),
            ("FRAMES", "Every Frame", "A force per vertex and frame: many unknowns, slow to converge, can jitter"),
        ],
        default="KEYS",
    )
    force_key_spacing: FloatProperty(
        name="Force Key Spacing",
        description="Time between control-force keys",
        default=0.25,
        min=1e-3,
        soft_max=2.0,
        unit="TIME_ABSOLUTE",
    )
    force_move_pins: BoolProperty(
        name="Move Pins",
        description="When a target poses pinned vertices away from "
        "their pins (a copy moved or turned as a whole), the control forces move those pins "
        "there too, smoothly, as a hand holding them would; pins no target moves stay put",
        default=True,
    )
    force_strength: FloatProperty(
        name="Force Strength Cost",
        description="How much strong control forces cost: "
        "pushing a vertex at 1 g for a second costs as much as being this far off a key. "
        "Higher keeps the motion closer to plain physics (the same at any mesh resolution)",
        default=0.00015,
        min=0.0,
        soft_max=0.1,
        unit="LENGTH",
        precision=5,
    )
    force_change: FloatProperty(
        name="Force Change Cost",
        description="How much changing control forces cost: a "
        "force changing by 1 g per second, for a second, costs as much as being this far off "
        "a key. Higher gives calmer forces",
        default=0.0015,
        min=0.0,
        soft_max=0.5,
        unit="LENGTH",
        precision=4,
    )
    max_iterations: IntProperty(
        name="Max Iterations",
        description="Optimizer iterations at most (each simulates the cloth a few times)",
        default=50,
        min=1,
        max=10000,
    )
    stop_within: FloatProperty(
        name="Stop Within",
        description="Stop optimizing once every target's mean distance "
        "is this close (0: go on until the optimizer converges or Max Iterations)",
        default=0.0,
        min=0.0,
        soft_max=0.05,
        unit="LENGTH",
        precision=4,
    )


class DiffClothRunState(bpy.types.PropertyGroup):
    """The run in progress and the last run's figures: on the window manager, so neither saved in
    the .blend nor rolled back by undo."""

    running: BoolProperty(default=False)
    cancel_requested: BoolProperty(default=False)
    kind: StringProperty(default="")
    progress: FloatProperty(name="Progress", default=0.0, min=0.0, max=1.0, subtype="FACTOR")
    iteration: IntProperty(default=0)
    loss: FloatProperty(default=0.0)
    normalized_loss: FloatProperty(default=0.0)
    elapsed: FloatProperty(default=0.0)
    status: StringProperty(default="")


CLASSES = (DiffClothObjectSettings, DiffClothSceneSettings, DiffClothRunState)


def upgrade(objects):
    """Cloths of files saved before SETTINGS_VERSION keep what they were: springs, their old
    defaults where left unset, the converged solver, Self Collisions without friction, pins
    outright above weight 0.5; their sphere and plane colliders no friction."""
    for obj in objects:
        s = obj.diffcloth
        if s.role == "CLOTH":
            if s.settings_version < 2:
                s.model, s.solver = "SPRINGS", "NEWTON"
                for key, old in LEGACY_DEFAULTS.items():
                    if not s.is_property_set(key):
                        setattr(s, key, old)
            if s.settings_version < 3 and not s.is_property_set("self_friction"):
                s.self_friction = 0.0  # they had none
            if s.settings_version < 4:
                s.legacy_pins = True
        elif s.role in ("SPHERE", "PLANE") and s.settings_version < 2:
            s.friction = 0.0  # they had none
        stamp(obj)


def stamp(obj):
    """Mark an object's settings as of this layout (so the next load does not upgrade them)."""
    if obj.diffcloth.role != "NONE" and obj.diffcloth.settings_version != SETTINGS_VERSION:
        obj.diffcloth.settings_version = SETTINGS_VERSION


def register():
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    bpy.types.Object.diffcloth = PointerProperty(type=DiffClothObjectSettings)
    bpy.types.Scene.diffcloth = PointerProperty(type=DiffClothSceneSettings)
    bpy.types.WindowManager.diffcloth = PointerProperty(type=DiffClothRunState)


def unregister():
    del bpy.types.WindowManager.diffcloth
    del bpy.types.Scene.diffcloth
    del bpy.types.Object.diffcloth
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
