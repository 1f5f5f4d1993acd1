"""The design fields: what a simulation's gradient (core.gradients.adjoint.Gradient), its tangent
and a Design (core.design.params) speak of. One list; a term's stiffness added here is known to
all three."""

import numpy as np


class Field:
    """A design field: its name, its shape in a scene, whether it is a physical term's coefficient
    (the potential's terms give its derivatives: core.terms.base.Term.fields), how a Design reads
    its value from a scene (None: a gradient-only field), and whether it is a Cloth argument."""

    def __init__(self, name, shape, doc, physical=False, read=None, cloth=False):
        self.name, self.shape, self.doc = name, shape, doc
        self.physical, self.read, self.cloth = physical, read, cloth


def _forces(sc):
    return np.zeros((sc.steps, sc.cloth.n, 3)) if sc.forces is None else sc.forces


FIELDS = (
    Field(
        "k_tension",
        lambda sc: (sc.cloth.n_tension,),
        "per tension spring (N/m)",
        True,
        lambda sc: sc.cloth.k_tension,
        True,
    ),
    Field(
        "k_bending",
        lambda sc: (sc.cloth.n_bending,),
        "per hinge (N·m) or bending spring (N/m)",
        True,
        lambda sc: sc.cloth.k_bending,
        True,
    ),
    Field(
        "k_compression",
        lambda sc: (sc.cloth.n_tension,),
        "per tension spring under compression (N/m); None where it is k_tension",
        True,
        lambda sc: sc.cloth.own_compression,
        True,
    ),
    Field(
        "k_shear", lambda sc: (sc.cloth.n_shear,), "per shear diagonal (N/m)", True, lambda sc: sc.cloth.k_shear, True
    ),
    Field("x0", lambda sc: (sc.cloth.n, 3), "initial positions (m)", read=lambda sc: sc.x0.copy()),
    Field("v0", lambda sc: (sc.cloth.n, 3), "initial velocities (m/s)", read=lambda sc: sc.v0),
    Field("forces", lambda sc: (sc.steps, sc.cloth.n, 3), "control force per frame and vertex (N)", read=_forces),
    Field("damping", lambda sc: (), "air damping (1/s)"),
    Field("contact_stiffness", lambda sc: (), "penalty stiffness (N/m per kg)", True),
    Field(
        "friction",
        lambda sc: (len(sc.colliders),),
        "Coulomb μ per collider",
        True,
        lambda sc: np.array([c.friction for c in sc.colliders]),
    ),
    Field("self_friction", lambda sc: (), "Coulomb μ between the cloth's layers", True, lambda sc: sc.self_friction),
    Field(
        "wind",
        lambda sc: (sc.steps + 1, 3),
        "wind velocity per frame (m/s), where the scene has wind",
        True,
        lambda sc: sc.wind,
    ),
    Field(
        "wind_drag",
        lambda sc: (),
        "the wind's drag on the cloth's own velocity (κ: pressed by w − κ·v)",
        True,
        lambda sc: sc.wind_drag,
    ),
    Field(
        "pin_path",
        lambda sc: (sc.steps + 1, len(sc.cloth.pinned), 3),
        "pinned positions per frame (m), where the scene has a pin path",
        read=lambda sc: sc.pin_path,
    ),
)
NAMES = tuple(f.name for f in FIELDS)
CLOTH = tuple(f.name for f in FIELDS if f.cloth)
PHYSICAL = tuple(f.name for f in FIELDS if f.physical)


_BY_NAME = {f.name: f for f in FIELDS}


def shapes(scene, names=NAMES):
    """{name: its shape in scene} for the fields named."""
    return {name: _BY_NAME[name].shape(scene) for name in names}


def zeros(scene, names=NAMES):
    """{name: zeros of its shape} for the fields named."""
    return {name: np.zeros(shape) for name, shape in shapes(scene, names).items()}


def read(scene):
    """The design's fields at scene: {name: value} of every field a Design carries."""
    return {f.name: f.read(scene) for f in FIELDS if f.read is not None}
