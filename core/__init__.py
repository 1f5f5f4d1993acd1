"""DiffCloth core: a differentiable mass-spring cloth simulator in numpy/scipy (never imports bpy).

Grouped by concern: `model` (meshes, fabrics, the potential's terms, the scene), `contact`
(colliders' and the cloth's own distance queries, penalty and friction), `solver` (the implicit
Euler step, its linear algebra, the simulation loop), `gradients` (adjoint and tangent passes),
`design` (parameters, losses, optimizers, proxies). The names below are the API.
"""

from .contact.colliders import MeshCollider, Plane, Sphere, inside_at_start
from .design.gradcheck import check_gradient
from .design.losses import KeyframeLoss
from .design.optimize import OptimizeResult, optimize
from .design.params import (
    PARAM_NAMES,
    ControlForces,
    Friction,
    GlobalStiffness,
    InitialRotation,
    InitialVelocity,
    KeyedForces,
    Param,
    SelfFriction,
    SpringStiffness,
    Wind,
    make_param,
    pins_off_targets,
    posed_pins,
    weight_for_distance,
)
from .gradients.adjoint import Gradient, value_and_grad
from .model.cloth import Cloth
from .model.material import PRESETS as FABRICS
from .model.material import Fabric
from .model.mesh import crossing_pairs, grid, triangulate
from .model.scene import Scene, max_self_distance
from .solver.integrator import SimulationError
from .solver.simulate import SolverStats, Trajectory, simulate

__all__ = [
    "FABRICS",
    "PARAM_NAMES",
    "Cloth",
    "ControlForces",
    "Fabric",
    "Friction",
    "GlobalStiffness",
    "Gradient",
    "InitialRotation",
    "InitialVelocity",
    "KeyedForces",
    "KeyframeLoss",
    "MeshCollider",
    "OptimizeResult",
    "Param",
    "SelfFriction",
    "Plane",
    "Scene",
    "SimulationError",
    "SolverStats",
    "Sphere",
    "SpringStiffness",
    "Trajectory",
    "Wind",
    "check_gradient",
    "crossing_pairs",
    "grid",
    "inside_at_start",
    "make_param",
    "max_self_distance",
    "optimize",
    "pins_off_targets",
    "posed_pins",
    "simulate",
    "triangulate",
    "value_and_grad",
    "weight_for_distance",
]
