"""DiffCloth core: a differentiable mass-spring cloth simulator in numpy/scipy (never imports bpy).

Its folders are layers, each importing only those before it: `numerics` (banded and sparse block
systems, BLAS threads, timing), `model` (meshes, fabrics, the scene, the design fields),
`contact` (colliders' and the cloth's own distance queries, penalty and lagged friction),
`terms` (the potential's energy terms behind one interface, and their sum), `solver` (the
implicit Euler step, the simulation loop), `gradients` (adjoint and tangent passes), `design`
(parameters, losses, optimizers, proxies, Refine). The names below are the API.
"""

from .contact.colliders import MeshCollider, Plane, Sphere, inside_at_start
from .design.gradcheck import check_gradient
from .design.losses import KeyframeLoss, joined_loss
from .design.optimize import OptimizeResult, optimize
from .design.params import (
    PARAM_NAMES,
    ControlForces,
    Friction,
    FrictionScale,
    GlobalStiffness,
    InitialRotation,
    InitialVelocity,
    KeyedForces,
    Param,
    SelfFriction,
    SpringStiffness,
    Wind,
    WindStrength,
    make_param,
    pins_off_targets,
    posed_pins,
    weight_for_distance,
)
from .design.reach import KeyReach, key_reach
from .design.refine import refine
from .gradients.adjoint import Gradient, value_and_grad
from .model.cloth import Cloth, JoinError, join
from .model.effectors import Effector, Falloff
from .model.joined import Joined
from .model.material import PRESETS as FABRICS
from .model.material import Fabric
from .model.mesh import crossing_pairs, grid, triangulate
from .model.scene import Goals, Scene, max_self_distance
from .solver.integrator import SimulationError
from .solver.simulate import SolverStats, Trajectory, simulate

__all__ = [
    "FABRICS",
    "PARAM_NAMES",
    "Cloth",
    "ControlForces",
    "Effector",
    "Fabric",
    "Falloff",
    "Friction",
    "FrictionScale",
    "GlobalStiffness",
    "Goals",
    "Gradient",
    "InitialRotation",
    "InitialVelocity",
    "KeyedForces",
    "KeyReach",
    "KeyframeLoss",
    "JoinError",
    "Joined",
    "joined_loss",
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
    "WindStrength",
    "check_gradient",
    "crossing_pairs",
    "grid",
    "join",
    "inside_at_start",
    "key_reach",
    "make_param",
    "max_self_distance",
    "optimize",
    "pins_off_targets",
    "posed_pins",
    "refine",
    "simulate",
    "triangulate",
    "value_and_grad",
    "weight_for_distance",
]
