"""The simulator checked by properties and residuals, not by golden trajectories."""

import sys
import types

import numpy as np
import pytest

import diffcloth.core as dc
from diffcloth.core.contact.penalty import Contact
from diffcloth.core.solver.integrator import StepModel
from diffcloth.core.terms.contact import ColliderContact
from diffcloth.core.terms.springs import spring_blocks, spring_geometry

G = np.array([0.0, 0.0, -9.81])
BENDING = ["hinge", "springs"]


def square(n=5, size=0.4, **kw):
    verts, tris = dc.grid(n, n, size=size)
    kw.setdefault("mass", 0.1)
    return dc.Cloth(verts, tris, **kw)


def crumpled(n=5, seed=0, scale=0.05):
    """Rest mesh plus noise: springs both stretched and compressed."""
    verts, tris = dc.grid(n, n, size=0.4)
    return verts + np.random.default_rng(seed).normal(scale=scale, size=verts.shape)


# --- terms: gradient and Hessian against finite differences ---------------------------------


@pytest.mark.parametrize("bending", BENDING)
@pytest.mark.parametrize(
    "colliders",
    [
        [],
        [dc.Sphere((0.0, 0.0, 0.02), 0.1)],
        [dc.Plane((0.0, 0.0, 0.01), (0.2, 0.1, 1.0))],
    ],
    ids=["cloth", "sphere", "plane"],
)
def test_gradient_and_hessian_match_finite_differences(colliders, bending):
    cloth = square(k_tension=30.0, k_bending=0.5, damping=0.4, pinned=[0], bending=bending)
    scene = dc.Scene(cloth, steps=2, dt=0.05, colliders=colliders, contact_stiffness=1.25e5, contact_thickness=0.005)
    model = StepModel(scene)
    rng = np.random.default_rng(1)
    x = scene.x0
    y = crumpled()
    y[cloth.pinned] = x[cloth.pinned]
    xhat = x + 0.05 * rng.normal(size=x.shape)
    u = rng.normal(size=x.shape) * 0.01
    pt = model.point(y, x, xhat, u, 0)
    g = model.gradient(pt, x, xhat, u)
    if colliders:
        assert len(pt.of(ColliderContact).active) >= 3  # the test exercises contact
    free, eps = model.free, 1e-6

    def energy(y):
        return model.point(y, x, xhat, u, 0).energy

    def gradient(y):
        return model.gradient(model.point(y, x, xhat, u, 0), x, xhat, u)

    for k in rng.choice(len(free) * 3, 8, replace=False):
        e = np.zeros_like(y)
        e[free[k // 3], k % 3] = eps
        fd = (energy(y + e) - energy(y - e)) / (2 * eps)
        assert g.ravel()[k] == pytest.approx(fd, rel=1e-6, abs=1e-9)
    # Hessian (stored as h²∇²E) times a direction vs the change of the gradient along it
    data = model.matrix(pt)
    d = rng.normal(size=(len(free), 3))
    dy = np.zeros_like(y)
    dy[free] = d
    fd = (gradient(y + eps * dy) - gradient(y - eps * dy)) / (2 * eps)
    hv = model.system.matvec(data, d.ravel()) / model.h**2
    assert np.allclose(hv, fd.ravel(), rtol=1e-5, atol=1e-6 * np.abs(fd).max())


def test_sphere_hessian_keeps_its_curvature_term():
    sphere = dc.Sphere((0.0, 0.0, 0.0), 0.5)
    x = np.array([[0.3, 0.2, 0.1], [0.0, 0.0, 0.45]])
    scene = types.SimpleNamespace(colliders=[sphere], contact_thickness=0.0, contact_smoothing=0.0)
    c = Contact(scene, x, 0, 100.0)
    eps = 1e-6
    for i in range(2):
        for a in range(3):
            e = np.zeros_like(x)
            e[i, a] = eps
            gp = Contact(scene, x + e, 0, 100.0).grad[i]
            gm = Contact(scene, x - e, 0, 100.0).grad[i]
            assert np.allclose(c.hess[i][:, a], (gp - gm) / (2 * eps), atol=1e-6)
    # inside the sphere the tangential curvature is negative; the projection drops it
    assert np.linalg.eigvalsh(c.hess[0]).min() < 0
    assert np.linalg.eigvalsh(c.hess_psd[0]).min() >= -1e-12


def test_spring_blocks_clamped_are_psd_and_exact_when_stretched():
    x = crumpled(seed=3, scale=0.08)
    cloth = square(bending="springs")
    length, u = spring_geometry(x[cloth.edges[:, 0]] - x[cloth.edges[:, 1]])
    k, stretch = cloth.stiffness, length - cloth.rest_lengths
    exact = spring_blocks(u, length, k, k * stretch)
    clamped = spring_blocks(u, length, k, np.maximum(k * stretch, 0.0))
    assert (stretch < 0).any() and (stretch > 0).any()
    assert np.linalg.eigvalsh(exact[stretch < 0]).min() < 0
    assert np.linalg.eigvalsh(clamped).min() >= -1e-9
    assert np.allclose(exact[stretch > 0], clamped[stretch > 0])
    # the exact blocks are the Hessian of ½k(L − L₀)²: compare with differences of its gradient
    i, eps = int(np.argmin(stretch)), 1e-6
    a, b = cloth.edges[i]

    def grad(p):
        d = p - x[b]
        return k[i] * (np.linalg.norm(d) - cloth.rest_lengths[i]) * d / np.linalg.norm(d)

    fd = np.stack([(grad(x[a] + eps * e) - grad(x[a] - eps * e)) / (2 * eps) for e in np.eye(3)], axis=1)
    assert np.allclose(exact[i], fd, atol=1e-6 * k[i])


# --- a step solves the implicit Euler equations -------------------------------------------------


def hinge_terms(cloth, x):
    """Per hinge: vertices, ∂E/∂x (4,3) and E of ½(k/A)‖Σwx‖², with the cotangents from the rest
    triangles' angles (arccos, not the solver's formula)."""
    r = cloth.rest

    def cot(p, a, b):
        u, v = r[a] - r[p], r[b] - r[p]
        return 1 / np.tan(np.arccos(u @ v / np.linalg.norm(u) / np.linalg.norm(v)))

    for (i0, i1, i2, i3), k in zip(cloth.hinges, cloth.k_bending):
        a0, a1, b0, b1 = cot(i0, i1, i2), cot(i1, i0, i2), cot(i0, i1, i3), cot(i1, i0, i3)
        w = np.array([-(a1 + b1), -(a0 + b0), a0 + a1, b0 + b1])
        area = (
            np.linalg.norm(np.cross(r[i1] - r[i0], r[i2] - r[i0]))
            + np.linalg.norm(np.cross(r[i1] - r[i0], r[i3] - r[i0]))
        ) / 2
        bend = w @ x[[i0, i1, i2, i3]]
        yield [i0, i1, i2, i3], (k / area) * np.outer(w, bend), 0.5 * k / area * bend @ bend


def forces(scene, x, v, step):
    """f(x, v) computed independently of the solver: springs, hinges, gravity, damping, contact, control."""
    cloth = scene.cloth
    e = cloth.edges
    d = x[e[:, 0]] - x[e[:, 1]]
    length = np.linalg.norm(d, axis=1)
    fs = (cloth.stiffness * (length - cloth.rest_lengths) / length)[:, None] * d
    f = np.zeros_like(x)
    np.add.at(f, e[:, 0], -fs)
    np.add.at(f, e[:, 1], fs)
    if cloth.bending == "hinge":
        for idx, grad, _ in hinge_terms(cloth, x):
            f[idx] -= grad
    f += cloth.masses[:, None] * (scene.gravity - cloth.damping * v)
    c = Contact(scene, x, (step + 1) / scene.substeps, scene.contact_stiffness * cloth.masses)
    np.add.at(f, c.active, -c.grad)
    if scene.forces is not None:
        f += scene.forces[step // scene.substeps]
    return f


@pytest.mark.parametrize("bending", BENDING)
def test_converged_steps_satisfy_implicit_euler(bending):
    cloth = square(k_tension=40.0, k_bending=0.2, damping=0.5, pinned=[20, 24], bending=bending)
    rng = np.random.default_rng(2)
    scene = dc.Scene(
        cloth,
        steps=6,
        dt=0.05,
        substeps=2,
        colliders=[dc.Sphere((0.0, 0.0, -0.15), 0.1)],
        contact_stiffness=1e5,
        forces=rng.normal(size=(6, 25, 3)) * 0.01,
    )
    traj = dc.simulate(scene)
    assert traj.stats.converged.all()
    h, m = scene.h, cloth.masses[:, None]
    free = np.setdiff1d(np.arange(cloth.n), cloth.pinned)
    for s in range(scene.n_steps):
        x1, v0, v1 = traj.step_x[s + 1], traj.step_v[s], traj.step_v[s + 1]
        r = m * (v1 - v0) - h * forces(scene, x1, v1, s)
        assert np.abs(r[free] / m[free]).max() * h < 1e-8  # residual in metres, as the solver measures it


@pytest.mark.parametrize("bending", BENDING)
def test_shifted_newton_steps_solve_implicit_euler(monkeypatch, bending):
    # the Levenberg-shifted Hessian (used when blended Newton crawls) from the first iteration on:
    # a hanging 16×16 cloth buckles between its pins, so the shift is taken, and every step
    # must still converge to a solution of the implicit Euler equations
    integrator = sys.modules["diffcloth.core.solver.integrator"]
    monkeypatch.setattr(integrator, "STALL", 0)
    shifted = []
    real = integrator.Stepper._refactor_shifted
    monkeypatch.setattr(
        integrator.Stepper, "_refactor_shifted", lambda self, *a, **kw: shifted.append(1) or real(self, *a, **kw)
    )
    verts, tris = dc.grid(16, 16)
    cloth = dc.Cloth(verts, tris, mass=0.5, k_tension=20.0, pinned=[240, 255], bending=bending)
    scene = dc.Scene(cloth, steps=10, dt=0.1)
    traj = dc.simulate(scene)
    assert shifted and traj.stats.converged.all()
    h, m = scene.h, cloth.masses[:, None]
    free = np.setdiff1d(np.arange(cloth.n), cloth.pinned)
    for s in range(scene.n_steps):
        r = m * (traj.step_v[s + 1] - traj.step_v[s]) - h * forces(scene, traj.step_x[s + 1], traj.step_v[s + 1], s)
        assert np.abs(r[free] / m[free]).max() * h < 1e-8


@pytest.mark.parametrize("solver", ["newton", "linearized"])
@pytest.mark.parametrize("bending", BENDING)
def test_cloth_at_rest_stays_at_rest(bending, solver):
    """No force at all (gravity off, nothing pinned or pinned): no motion, and finite gradients
    (the linearized step's solve of a zero right-hand side gave 0/0 and "diverged at frame 1")."""
    for pinned in ([0], []):
        scene = dc.Scene(square(pinned=pinned, bending=bending), steps=10, dt=0.1, gravity=(0, 0, 0), solver=solver)
        traj = dc.simulate(scene)
        assert np.abs(traj.x - scene.x0).max() < 1e-12 and np.abs(traj.v).max() < 1e-11
        value, grad = dc.value_and_grad(scene, dc.KeyframeLoss({10: scene.x0 + 0.01}), traj)
        assert value > 0 and np.isfinite(grad.v0).all() and np.abs(grad.v0).max() > 0


@pytest.mark.parametrize("solver", ["newton", "linearized"])
@pytest.mark.parametrize("gravity", [G, (2.0, -1.0, 0.5)], ids=["earth", "sideways and up"])
@pytest.mark.parametrize("damping", [0.0, 0.7])
def test_unpinned_cloth_follows_discrete_free_fall(damping, gravity, solver):
    """Gravity is a vector of the scene's, in any direction."""
    v0 = np.array([0.3, -0.2, 1.0])
    scene = dc.Scene(square(damping=damping), steps=8, dt=0.1, substeps=2, v0=v0, gravity=gravity, solver=solver)
    traj = dc.simulate(scene)
    x, v, h = scene.x0.copy(), np.tile(v0, (scene.cloth.n, 1)), scene.h
    for s in range(scene.n_steps):
        v = (v + h * np.asarray(gravity)) / (1 + h * damping)
        x = x + h * v
        assert np.allclose(traj.step_x[s + 1], x, atol=1e-10)
    assert np.allclose(traj.x[-1], x, atol=1e-10) and np.allclose(traj.v[-1], v, atol=1e-8)


@pytest.mark.parametrize("solver", ["newton", "linearized"])
def test_gradients_under_gravity_in_another_direction(solver):
    """Gravity along the slope of a tilted plane (with friction where the solver's gradients have
    it): the adjoint's gradients still match central finite differences."""
    cloth = square(pinned=[0])
    scene = dc.Scene(
        cloth,
        steps=6,
        dt=0.05,
        gravity=(3.0, 0.0, -4.0),
        colliders=[dc.Plane((0, 0, -0.07), (0.2, 0.0, 1.0), friction=0.3 if solver == "newton" else 0.0)],
        contact_stiffness=5e4,
        tol=1e-12,
        solver=solver,
    )
    target = dc.simulate(scene.replace(v0=np.array([0.1, 0.2, 0.0]))).x[6]
    for check in dc.check_gradient(scene, dc.KeyframeLoss({6: target}), ["v0"], components=range(3)):
        assert check["rel_error"] < 1e-4, check


def test_pins_stay_exactly_on_their_path():
    cloth = square(pinned=[20, 24])
    static = dc.simulate(dc.Scene(cloth, steps=5, dt=0.1))
    assert np.array_equal(static.x[:, cloth.pinned], np.broadcast_to(cloth.rest[cloth.pinned], (6, 2, 3)))
    path = cloth.rest[cloth.pinned][None] + np.linspace(0, 1, 6)[:, None, None] * np.array([0.1, 0.0, 0.3])
    moving = dc.simulate(dc.Scene(cloth, steps=5, dt=0.1, substeps=3, pin_path=path))
    assert np.abs(moving.x[:, cloth.pinned] - path).max() < 1e-15
    mid = moving.step_x[4, cloth.pinned]  # one third into frame 1 → 2
    assert np.allclose(mid, path[1] + (path[2] - path[1]) / 3)


@pytest.mark.parametrize(
    "collider", [dc.Plane((0, 0, -0.2), (0, 0, 1)), dc.Sphere((0, 0, -1.0), 0.8)], ids=["plane", "sphere"]
)
def test_dropped_cloth_comes_to_rest_on_collider(collider):
    kc = 5e4  # N/m per kg: a vertex sinks g/kc under its own weight
    scene = dc.Scene(
        square(n=6, k_tension=30.0, k_bending=0.5, damping=2.0),
        steps=40,
        dt=0.05,
        colliders=[collider],
        contact_stiffness=kc,
    )
    traj = dc.simulate(scene)
    assert traj.stats.converged.all()
    x, m = traj.x[-1], scene.cloth.masses
    if isinstance(collider, dc.Plane):
        depth = -(x[:, 2] + 0.2)
    else:
        depth = 0.8 - np.linalg.norm(x - collider.center, axis=1)
    assert np.abs(traj.v[-1]).max() < 0.05  # settled
    # equilibrium: a vertex's push-back kc·m·d balances at most the whole cloth's weight
    deepest = np.argmax(depth)
    assert depth[deepest] > 0 and depth[deepest] < m.sum() * 9.81 / (kc * m[deepest])


def drape(cells, size=0.4, radius=0.2):
    """A size×size cloth of cells×cells cells (0.5 kg/m², the add-on's tension, a 3e-4 N·m
    rigidity) dropped onto a sphere and damped to rest: (cells+1, cells+1, 3) positions."""
    verts, tris = dc.grid(cells + 1, cells + 1, size=size)
    verts[:, 2] = radius + 0.005
    cloth = dc.Cloth(verts, tris, mass=0.5 * size**2, k_tension=20.0, k_bending=3e-4, damping=2.0)
    traj = dc.simulate(dc.Scene(cloth, steps=48, dt=1 / 24, colliders=[dc.Sphere((0, 0, 0), radius)]))
    assert traj.stats.converged.all() and np.abs(traj.v[-1]).max() < 1e-2  # at rest
    return traj.x[-1].reshape(cells + 1, cells + 1, 3)


def test_drape_over_sphere_is_alike_at_three_resolutions():
    """Rigidity, tension, mass per area and contact stiffness per mass mean the same on any mesh."""
    from scipy.interpolate import griddata

    shapes = {cells: drape(cells) for cells in (16, 32, 64)}
    fine = shapes[64]
    # the coarse meshes' vertices are material points of the fine one
    for cells in (16, 32):
        step = 64 // cells
        apart = np.linalg.norm(shapes[cells] - fine[::step, ::step], axis=2)
        assert apart.max() < 4e-3 and apart.mean() < 1e-3, (cells, apart.max(), apart.mean())
    # the surfaces as height fields over the same points
    xy = np.stack(np.meshgrid(*2 * [np.linspace(-0.18, 0.18, 21)]), -1).reshape(-1, 2)
    heights = {c: griddata(x[..., :2].reshape(-1, 2), x[..., 2].ravel(), xy) for c, x in shapes.items()}
    inside = np.isfinite(heights[16]) & np.isfinite(heights[32]) & np.isfinite(heights[64])
    assert inside.sum() > 0.5 * len(xy)
    for cells in (16, 32):
        assert np.abs(heights[cells] - heights[64])[inside].max() < 4e-3
    assert fine[..., 2].min() < 0.05  # it hangs well down the sphere, not just on its top


@pytest.mark.parametrize("bending", BENDING)
def test_energy_never_grows_without_control(bending):
    cloth = square(k_tension=40.0, k_bending=0.3, pinned=[20, 24], bending=bending)
    scene = dc.Scene(cloth, steps=30, dt=0.05, colliders=[dc.Sphere((0.0, 0.0, -0.3), 0.12)], contact_stiffness=2.5e5)
    traj = dc.simulate(scene)
    e = cloth.edges

    def energy(x, v):
        length = np.linalg.norm(x[e[:, 0]] - x[e[:, 1]], axis=1)
        c = Contact(scene, x, 0, scene.contact_stiffness * cloth.masses)
        hinges = sum(eh for _, _, eh in hinge_terms(cloth, x)) if bending == "hinge" else 0.0
        return (
            0.5 * np.sum(cloth.masses[:, None] * v * v)
            + 0.5 * np.sum(cloth.stiffness * (length - cloth.rest_lengths) ** 2)
            - np.sum(cloth.masses[:, None] * scene.gravity * x)
            + c.energy
            + hinges
        )

    total = np.array([energy(x, v) for x, v in zip(traj.x, traj.v)])
    assert np.all(np.diff(total) <= 1e-9 * np.abs(total).max())
    assert total[-1] < total[0]


@pytest.mark.parametrize("bending", BENDING)
def test_runs_are_bit_identical(bending):
    scene = dc.Scene(
        square(pinned=[20, 24], bending=bending), steps=10, dt=0.1, colliders=[dc.Sphere((0, 0, -0.3), 0.15)]
    )
    a, b = dc.simulate(scene), dc.simulate(scene)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.v, b.v)


def test_moving_sphere_pushes_the_cloth():
    cloth = square(k_tension=30.0, pinned=[20, 24])
    path = np.array([[0.0, -0.8 + 0.06 * f, -0.25] for f in range(21)])
    still = dc.simulate(dc.Scene(cloth, steps=20, dt=0.05, colliders=[dc.Sphere(path[0], 0.15)]))
    pushed = dc.simulate(dc.Scene(cloth, steps=20, dt=0.05, colliders=[dc.Sphere(path, 0.15)]))
    assert pushed.x[-1][:, 1].mean() > still.x[-1][:, 1].mean() + 0.02


def test_frames_and_substeps_shapes():
    scene = dc.Scene(square(), steps=4, dt=0.1, substeps=3)
    traj = dc.simulate(scene)
    assert traj.x.shape == (5, 25, 3) and traj.step_x.shape == (13, 25, 3)
    assert np.array_equal(traj.x[2], traj.step_x[6])
    assert len(traj.stats.iterations) == 12


@pytest.mark.parametrize("bending,k_bending", [("springs", 0.1), ("hinge", None)], ids=["springs", "hinge"])
@pytest.mark.parametrize("sphere", [False, True], ids=["hanging", "sphere"])
def test_thesis_hanging_cloth_converges_every_step(sphere, bending, k_bending):
    n = 20
    verts, tris = dc.grid(n, n)
    cloth = dc.Cloth(
        verts, tris, mass=0.5, k_tension=20.0, k_bending=k_bending, pinned=[(n - 1) * n, n * n - 1], bending=bending
    )
    scene = dc.Scene(
        cloth, steps=100, dt=0.1, contact_stiffness=8e5, colliders=[dc.Sphere((0, 0.1, -0.45), 0.25)] if sphere else []
    )
    traj = dc.simulate(scene)
    assert traj.stats.converged.all(), traj.stats.unconverged_steps
    assert traj.stats.residual.max() <= scene.tol * 1.0
    assert traj.x[-1][:, 2].min() < -0.8  # it hangs
    if sphere:
        assert (np.linalg.norm(traj.x - np.array([0, 0.1, -0.45]), axis=2) < 0.25).any()  # it touched


def test_divergence_names_the_frame():
    # beyond the stiffness it checks (bounds=False): a step that fails
    scene = dc.Scene(square(k_tension=1e9, pinned=[0]), steps=5, dt=0.1, max_newton=2, bounds=False)
    with pytest.raises(dc.SimulationError, match=r"frame 1 .*substeps") as err:
        dc.simulate(scene)
    assert err.value.frame == 1


def test_a_guess_picks_which_solution_a_buckling_step_takes():
    """A strip squeezed by its pins (no gravity) may stay flat or buckle either way: every step
    has several solutions. From scratch it stays flat, by symmetry; started from a buckled run's
    steps it buckles that way, from that run mirrored the other way, every step converged; and
    a trajectory given as its own guess comes back bit for bit."""
    verts, tris = dc.grid(9, 3, size=0.4)
    left = np.flatnonzero(np.isclose(verts[:, 0], -0.2))
    right = np.flatnonzero(np.isclose(verts[:, 0], 0.2))
    pins = np.r_[left, right]
    cloth = dc.Cloth(verts, tris, mass=0.05, k_tension=50.0, k_bending=1e-4, pinned=pins)
    inward = np.where(np.isin(pins, left), 1.0, -1.0)[None, :, None] * [1.0, 0.0, 0.0]
    scene = dc.Scene(
        cloth,
        steps=10,
        dt=0.05,
        gravity=(0, 0, 0),
        pin_path=verts[pins][None] + np.linspace(0.0, 0.08, 11)[:, None, None] * inward,
    )
    middle = np.flatnonzero(np.isclose(verts[:, 0], 0.0))
    flat = dc.simulate(scene)
    assert np.abs(flat.x[:, middle, 2]).max() < 1e-9
    kick = np.zeros_like(verts)
    kick[:, 2] = 0.05 * np.cos(np.pi * verts[:, 0] / 0.4)
    buckled = dc.simulate(scene.replace(v0=kick)).step_x
    shape = buckled[-3 * scene.substeps, middle, 2]  # how it buckled (which way the kick took it)
    assert np.abs(shape).min() > 0.04
    for sign in (1.0, -1.0):
        run = dc.simulate(scene, guess=buckled * [1.0, 1.0, sign])
        assert run.stats.converged.all()
        assert np.array_equal(np.sign(run.x[-3, middle, 2]), sign * np.sign(shape))
        assert np.abs(run.x[-3, middle, 2]).min() > 0.04
        again = dc.simulate(scene, guess=run.step_x)
        assert np.array_equal(again.step_x, run.step_x) and (again.stats.iterations == 0).all()
    with pytest.raises(ValueError, match="guess must have shape"):
        dc.simulate(scene, guess=buckled[1:])
