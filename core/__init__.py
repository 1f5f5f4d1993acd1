"""DiffCloth core: a differentiable mass-spring cloth simulator in numpy/scipy (never imports bpy)."""

from .adjoint import Gradient, value_and_grad
from .cloth import Cloth
from .colliders import MeshCollider, Plane, Sphere, inside_at_start
from .gradcheck import check_gradient
from .integrator import SimulationError
from .losses import KeyframeLoss
from .material import PRESETS as FABRICS
from .material import Fabric
from .mesh import crossing_pairs, grid, triangulate
from .optimize import OptimizeResult, optimize
from .params import (
    PARAM_NAMES,
    ControlForces,
    Friction,
    GlobalStiffness,
    InitialRotation,
    InitialVelocity,
    KeyedForces,
    Param,
    SpringStiffness,
    Wind,
    make_param,
    pins_off_targets,
    posed_pins,
    weight_for_distance,
)
from .scene import Scene, max_self_distance
from .simulate import SolverStats, Trajectory, simulate

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
