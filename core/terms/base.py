"""The interface every energy term of the cloth's potential Φ implements (after PolyFEM's Form).

A term is built once per scene (`Term.build`: none, one or several instances) and asked, at a
point y of a step, for its quantities there (`at`), then for what the solver and the gradient
passes read from those quantities. Every method but `at` and `energy` has a default that adds
nothing, so a term states only what it has: a term constant in the positions has no third
derivatives, one without lagged data no lag terms, one without design fields no design
derivatives.

Conventions: `add_*` methods add into an (n, 3) array over all vertices; design methods add into a
dict of design fields (core.model.fields); `hessian` adds h²·∇²Φ (or the linearized step's
positive-semidefinite H̃) into a Hessian accumulator.
"""


class Point:
    """Where the terms are evaluated: positions y (n,3) of integrator step s, the step's StepLag
    (core.contact.penalty; None when nothing lags), and a memo that terms sharing quantities fill
    (springs on the same edges: their lengths)."""

    def __init__(self, y, s, lag):
        self.y, self.s, self.lag, self.memo = y, s, lag, {}


class HessianMode:
    """Which matrix a Hessian assembly builds: the exact ∇²Φ (default), with negative terms scaled
    by beta (0 clamps them; Newton's indefinite fallback), with the springs' carried Newton forces
    (`carried`, per term, see Term.newton_forces), or the linearized step's smooth projection;
    majorized: friction's curvature that of its majorizer (terms.friction), where Newton's last
    step overshot."""

    def __init__(self, carried=None, beta=1.0, projected=False, majorized=False):
        self.carried, self.beta, self.projected, self.majorized = carried or {}, beta, projected, majorized


class Term:
    """One energy term: its value, derivatives, lagged data and design derivatives at a point."""

    fields = ()  # the design fields (core.model.fields) whose derivatives it gives
    # whether its quantities follow what a step refits of its lag at the same positions (friction's
    # slip, the self-contact pairs, where the colliders' penalty is linearized): a refitted State
    # evaluates only such terms again
    refits = False

    @classmethod
    def build(cls, pot):
        """The scene's instances of this term, none where the scene lacks it; pot: the Potential
        (its scene, BlockSystem, free-vertex numbering fidx, hess_scale h²)."""
        return [cls(pot)]

    def at(self, p):
        """Its quantities at the Point p."""
        raise NotImplementedError

    def energy(self, q):
        raise NotImplementedError

    def add_gradient(self, q, out):
        """out += ∇Φ."""

    def hessian(self, q, acc, mode):
        """Add h²·∇²Φ (mode: HessianMode) into acc (a Hessian accumulator over the free vertices)."""

    def add_hess_vec(self, q, v, out):
        """out += ∇²Φ·v, exact."""

    # the linearized step's own matrix H̃ changes with the positions (zero where it is constant)
    def add_third(self, q, a, b, out):
        """out += ∇ₓ(aᵀ·H̃·b)."""

    def add_third_tangent(self, q, w, b, out):
        """out += (∂H̃[w])·b."""

    # what the step takes from its start state xₛ, vₛ and its control force uₛ (contact planes,
    # friction's normal forces)
    def add_lag_gradient(self, q, v, out, out_v, out_u):
        """out += ∂(∇Φ·v)/∂xₛ, out_v += ∂(∇Φ·v)/∂vₛ, out_u += ∂(∇Φ·v)/∂uₛ."""

    def add_lag_tangent(self, q, dxs, dvs, dus, out):
        """out += (∂∇Φ/∂xₛ)·δxₛ + (∂∇Φ/∂vₛ)·δvₛ + (∂∇Φ/∂uₛ)·δuₛ."""

    # design derivatives
    def design_gradient(self, q, v, out):
        """out[field] += ∂(∇Φ·v)/∂field."""

    def design_tangent(self, q, dp, out):
        """out += (∂∇Φ/∂p)·δp for design directions dp (a dict of fields)."""

    def design_hess(self, q, a, b, out):
        """out[field] += ∂(aᵀ·H̃·b)/∂field (a linearized step's matrix)."""

    def design_hess_tangent(self, q, dp, b, out):
        """out += (∂H̃/∂p·δp)·b."""

    # Newton's mixed form: forces a term carries along the iterations (springs' tensions)
    def newton_forces(self, q):
        """The forces a Newton iteration starts from at q, or None when the term carries none."""
        return None

    def newton_update(self, forces, old, step, alpha):
        """The carried forces after a Newton step alpha·step (n,3, zero on pins) from old (its
        quantities before the step): the linearization's prediction."""
        return forces
