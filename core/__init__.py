"""DiffCloth core: a differentiable mass-spring cloth simulator in numpy/scipy (never imports bpy)."""

from .cloth import Cloth
from .colliders import MeshCollider, Plane, Sphere, inside_at_start
from .integrator import SimulationError
from .material import PRESETS as FABRICS
from .material import Fabric
from .mesh import grid, triangulate
from .scene import Scene
from .simulate import SolverStats, Trajectory, simulate

__all__ = ["Cloth", "FABRICS", "Fabric", "MeshCollider", "Plane", "Scene", "SimulationError", "SolverStats", "Sphere", "Trajectory", "grid",
           "inside_at_start", "simulate", "triangulate"]
from .adjoint import Gradient, value_and_grad
from .losses import KeyframeLoss

__all__ += ["Gradient", "KeyframeLoss", "value_and_grad"]
from .optimize import OptimizeResult, optimize
from .params import (PARAM_NAMES, ControlForces, Friction, GlobalStiffness, InitialRotation, InitialVelocity, KeyedForces,
                     Param, SpringStiffness, Wind, make_param, pins_off_targets, posed_pins, weight_for_distance)

__all__ += ["ControlForces", "Friction", "GlobalStiffness", "InitialRotation", "InitialVelocity", "KeyedForces", "OptimizeResult",
            "PARAM_NAMES", "Param", "SpringStiffness", "Wind", "make_param", "optimize", "pins_off_targets", "posed_pins",
            "weight_for_distance"]
from .gradcheck import check_gradient

__all__ += ["check_gradient"]
