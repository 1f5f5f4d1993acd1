"""The cloth's potential Φ: the sum of the scene's energy terms, and what Newton's method, the
adjoint and the tangent read from it, each a loop over the terms (core.terms.base.Term)."""

import functools

import numpy as np

from ..contact.penalty import StepLag
from ..contact.self_contact import SelfQuery
from ..model import fields
from ..numerics.linalg import Coupled
from ..numerics.scatter import scatter_add
from .base import Point
from .contact import ColliderContact
from .effectors import FieldForces
from .friction import CoulombFriction
from .goals import GoalSprings
from .gravity import Gravity
from .hinges import HingeBending
from .rest_angles import RestAngles
from .self_contact import SelfContact
from .springs import BendingSprings, Compression, Sewing, Shear, SpringGeometry, Tension

# every term, in the order their contributions are summed: a new term is one class and a line here
TERMS = (
    Tension,
    Compression,
    Shear,
    BendingSprings,
    Sewing,
    HingeBending,
    RestAngles,
    Gravity,
    FieldForces,
    GoalSprings,
    ColliderContact,
    CoulombFriction,
    SelfContact,
)


class Hessian:
    """A Hessian being assembled over a BlockSystem's free vertices: its pattern's storage data,
    plus blocks of vertex–triangle pairs outside the pattern (self-contact, self-friction), which
    make it a linalg.Coupled matrix."""

    def __init__(self, pot):
        self.pot, self.data, self.pairs = pot, np.zeros(pot.system.size), []

    def add_diagonal(self, vertices, blocks):
        """h²·blocks (k,3,3) on the diagonal blocks of vertices (pins skipped)."""
        p = self.pot.fidx[vertices]
        free = p >= 0
        self.pot.system.add_diagonal(self.data, p[free], self.pot.hess_scale * blocks[free])

    def add_pairs(self, stencil, triangle, blocks):
        """h²·blocks M (P,3,3) of vertex–triangle pairs (stencils (P,4): the vertex, then the
        triangle's corners; their triangles (P,)), spread by core.contact.self_contact.WEIGHTS."""
        self.pairs.append((stencil, triangle, blocks))

    def copy(self):
        out = Hessian(self.pot)
        out.data, out.pairs = self.data.copy(), list(self.pairs)
        return out

    def result(self):
        if not self.pairs:
            return self.data
        stencil, triangle, blocks = (np.concatenate(a) for a in zip(*self.pairs))
        return self._coupled(stencil, triangle, blocks)

    def _coupled(self, stencil, triangle, blocks):
        """wₖwₗ·M on the vertex's and the triangle's blocks in the pattern, and on the
        vertex–corner blocks beside it."""
        pot = self.pot
        m = pot.hess_scale * blocks
        p = pot.fidx[stencil[:, 0]]
        free = p >= 0
        data = self.data
        pot.system.add_diagonal(data, p[free], m[free])
        slots = pot.self_slots[triangle]  # (P,9,9)
        held = slots >= 0
        scatter_add(data, slots[held], np.broadcast_to((m / 9).reshape(-1, 1, 9), slots.shape)[held])
        corners = pot.fidx[stencil[:, 1:]]
        both = free[:, None] & (corners >= 0)
        rows = np.broadcast_to(p[:, None], corners.shape)[both]
        couplings = np.broadcast_to(-m[:, None] / 3, corners.shape + (3, 3))[both]
        return Coupled(data, pot.system.coupling(rows, corners[both], couplings))


class State:
    """The terms' quantities at positions y of integrator step s and Φ(y); the integrator adds its
    incremental potential as `energy`. like: a State at the same y and step whose lag the step has
    refitted since (Term.refits): only the terms that follow it are evaluated again, the others'
    quantities and their assembled linearized-step matrix (`fixed`) are shared."""

    def __init__(self, potential, y, s, lag=None, like=None):
        self.y = y
        p = Point(y, s, lag)
        if like is None:
            self.terms = [(term, term.at(p)) for term in potential.terms]
        else:
            self.terms = [(term, term.at(p) if term.refits else q) for term, q in like.terms]
        self.energy = None
        self.fixed = None if like is None else like.fixed

    @functools.cached_property
    def phi(self):
        """Φ(y), when first asked (Newton's line search; a linearized step never does)."""
        return sum(term.energy(q) for term, q in self.terms)

    def of(self, kind):
        """The quantities of the first term of class kind, None without one."""
        return next((q for term, q in self.terms if isinstance(term, kind)), None)


class Potential:
    """Φ of a scene: its terms (TERMS), over a BlockSystem of the free vertices (fidx) whose
    matrices hold hess_scale·∇²Φ (the integrator's h²)."""

    def __init__(self, scene, system, fidx, hess_scale):
        cloth = scene.cloth
        self.scene, self.system, self.fidx, self.hess_scale = scene, system, fidx, hess_scale
        self.free = np.flatnonzero(fidx >= 0)
        self.masses = cloth.masses
        self.contact_k = scene.contact_stiffness * cloth.masses
        self.self_query = self.self_slots = None
        if scene.self_distance > 0:
            self.self_query = SelfQuery(cloth, scene.self_distance, scene.self_pieces, scene.self_within)
            self.self_slots = system.triangle_slots(fidx[cloth.tris])
        self._edges = None
        self.terms = [term for kind in TERMS for term in kind.build(self)]
        self.refitting = any(term.refits for term in self.terms)  # a linearized step may refit its lag

    def edge_geometry(self):
        """The SpringGeometry of the cloth's tension edges, one for the terms on them."""
        if self._edges is None:
            self._edges = SpringGeometry(self, self.scene.cloth.tension_edges)
        return self._edges

    def lag(self, x, v, s, pairs=None):
        """What step s takes from its start state (contact.StepLag), or None when nothing does;
        pairs: the self-contact pairs the step used (a step replayed)."""
        return StepLag(self, x, v, s, pairs) if StepLag.needed(self.scene) else None

    def grow_self_pairs(self, lag, x, end):
        """Add to lag's self-contact planes the pairs within the self distance, or crossed, at end
        (a solve's result); whether any was new."""
        grown = lag.cloth.grown(x, end)
        if grown is not None:
            lag.set_cloth(grown)
        return grown is not None

    def at(self, y, s, lag=None, like=None):
        return State(self, y, s, lag, like)

    def _sum(self, st, method, *args):
        out = np.zeros_like(st.y)
        for term, q in st.terms:
            getattr(term, method)(q, *args, out)
        return out

    def gradient(self, st):
        """∇Φ (n,3)."""
        return self._sum(st, "add_gradient")

    def hessian(self, st, mode):
        """Storage data (or a linalg.Coupled) of hess_scale·∇²Φ at st over the free vertices,
        the matrix mode (terms.base.HessianMode) says."""
        if mode.projected and self.refitting:  # a linearized step's: what its refits leave is assembled once
            if st.fixed is None:
                st.fixed = self._assemble(st, mode, Hessian(self), refits=False)
            return self._assemble(st, mode, st.fixed.copy(), refits=True).result()
        acc = Hessian(self)
        for term, q in st.terms:
            term.hessian(q, acc, mode)
        return acc.result()

    @staticmethod
    def _assemble(st, mode, acc, refits):
        for term, q in st.terms:
            if term.refits == refits:
                term.hessian(q, acc, mode)
        return acc

    def hess_vec(self, st, v):
        """∇²Φ·v (n,3), exact, over all vertices."""
        return self._sum(st, "add_hess_vec", v)

    def third(self, st, a, b):
        """∇ₓ(aᵀ·H̃(x)·b) (n,3) for a linearized step's matrix H̃."""
        return self._sum(st, "add_third", a, b)

    def third_tangent(self, st, w, b):
        """(∂H̃[w])·b (n,3): the derivative of H̃·b along positions w."""
        return self._sum(st, "add_third_tangent", w, b)

    def lag_gradient(self, st, v):
        """∂(∇Φ·v)/∂xₛ, ∂(∇Φ·v)/∂vₛ and ∂(∇Φ·v)/∂uₛ (n,3 each): how the step's start and its
        control force move its terms (a mesh's planes, friction's lagged normal force, normal and
        anchor; zero without them)."""
        out, out_v, out_u = np.zeros_like(st.y), np.zeros_like(st.y), np.zeros_like(st.y)
        for term, q in st.terms:
            term.add_lag_gradient(q, v, out, out_v, out_u)
        return out, out_v, out_u

    def lag_tangent(self, st, dxs, dvs, dus):
        """(∂∇Φ/∂xₛ)·δxₛ + (∂∇Φ/∂vₛ)·δvₛ + (∂∇Φ/∂uₛ)·δuₛ (n,3): the forward counterpart of
        lag_gradient."""
        return self._sum(st, "add_lag_tangent", dxs, dvs, dus)

    def design_gradient(self, st, v, wanted=fields.PHYSICAL):
        """∂(∇Φ·v)/∂p for the design's physical fields (core.model.fields.PHYSICAL), computed by
        the terms that have some of those `wanted` (the rest stay zero)."""
        out = fields.zeros(self.scene, fields.PHYSICAL)
        for term, q in st.terms:
            if any(f in wanted for f in term.fields):
                term.design_gradient(q, v, out)
        return out

    def design_tangent(self, st, dp):
        """(∂∇Φ/∂p)·δp (n,3) for a design direction dp (all physical fields present)."""
        return self._sum(st, "design_tangent", dp)

    def design_hess(self, st, a, b, wanted=fields.PHYSICAL):
        """∂(aᵀ·H̃·b)/∂p for the physical fields, as design_gradient gives ∂(∇Φ·v)/∂p."""
        out = fields.zeros(self.scene, fields.PHYSICAL)
        for term, q in st.terms:
            if any(f in wanted for f in term.fields):
                term.design_hess(q, a, b, out)
        return out

    def design_hess_tangent(self, st, dp, b):
        """(∂H̃/∂p·δp)·b (n,3): the forward counterpart of design_hess."""
        return self._sum(st, "design_hess_tangent", dp, b)

    def newton_forces(self, st):
        """The forces Newton's mixed form carries from st, per term that has them."""
        return {term: f for term, q in st.terms if (f := term.newton_forces(q)) is not None}

    def newton_update(self, forces, old, step, alpha):
        """The carried forces after a Newton step alpha·d (step: that displacement, n×3) from old."""
        return {
            term: term.newton_update(f, q, step, alpha)
            for (term, q) in old.terms
            if (f := forces.get(term)) is not None
        }
