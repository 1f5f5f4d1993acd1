"""Gradients against gradient-free CMA-ES: loss against the number of simulations and seconds.

As in the supplement of a differentiable soft/rigid-body simulation paper (its comparison with
Hansen's CMA-ES), on three of this project's problems, each solved by this project's optimizer
(core.optimize: its default method, Gauss–Newton here, and L-BFGS-B) and by CMA-ES (Hansen's `cma`
package, its default settings but for the budget, the seed and a separable covariance where a
full one cannot be stored): the same θ and bounds (core.design.params.Design), the same objective
(keyframe loss + regularizers, core.design.optimize.Objective's value), started from the same design.

Problems: "stiffness", thesis_experiments.py's first experiment (a 20×20 cloth, 100 frames, one
global tension stiffness from 10 to the true 20; θ = log k, one component); "throw", its fifth
(all initial velocities of an unpinned 20×20 cloth thrown onto the sphere, θ = the mean velocity
and each vertex's deviation from it, 1203 components, starting at rest); "artist",
artist_match.py's core case at 32×32 ("whole" hand-posed keys, the add-on's default KeyedForces
control and regularization, Move Pins, started from the motion the keys were posed from; 27648
components).

Every simulation counts: a CMA-ES evaluation is one forward simulation; a gradient method's
count is its forward simulations (line-search and trial runs included, a trial cut short once it
is worse included) plus each adjoint or tangent pass weighted by its cost in forward simulations
of the same run (the ratio of a pass's mean seconds to a forward's, from result.passes). Each run
records its best loss so far against these forward-equivalents and against wall seconds. CMA-ES
gets `--factor` times the gradient methods' largest count (capped per problem by `--cap`).

Output: one JSON line per problem and method (stdout; with its trace), docs/vs_cma.png (log loss
against simulations and against seconds, one column per problem) and docs/vs_cma.md (simulations
and seconds each method needs to reach the same losses). `--replot FILE` redraws both from saved
JSON lines.

    .envs/py313-bpy5.2/bin/python benchmarks/vs_cma.py [--problems stiffness throw artist]
        [--factor 8] [--cap stiffness=200 throw=2000 artist=300] [--seed 1] [--out docs/vs_cma]
        [--replot lines.jsonl]
"""

import argparse
import dataclasses
import importlib
import json
import math
import pathlib
import sys
import time
from types import ModuleType

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import thesis_experiments as te  # noqa: E402  (it loads the repository as the package diffcloth)

from diffcloth import core  # noqa: E402

GRADIENT_METHODS = (("auto", "Gauss–Newton (default)"), ("l-bfgs-b", "L-BFGS-B"))
CMA_LABEL = "CMA-ES"
PROBLEMS = ("stiffness", "throw", "artist")
FACTOR = 8  # CMA-ES's budget: this many times the gradient methods' largest count of simulations
CAPS = {"stiffness": 200, "throw": 800, "artist": 137}  # artist: the start and 4 generations of 34
# CMA-ES's initial step size per problem (in θ's units) and why it was picked
SIGMA0 = {
    "stiffness": (
        0.75,
        "θ = log k: the optimum is expected within x0 ± 3·sigma0 (cma's rule of thumb), i.e. k anywhere from 1 to "
        "95 N/m around the start's 10",
    ),
    "throw": (
        0.3,
        "m/s, for the mean velocity and every vertex's deviation alike: in trial runs of 200 simulations 0.3 ended "
        "lowest (3e-3 of the start's loss, still falling), while 1 (a throw's speed within x0 ± 3·sigma0, cma's rule "
        "of thumb) stalled at 8e-3 and 3 at 4e-2",
    ),
    "artist": (
        0.1,
        "m/s² of control acceleration: in trial runs of two generations (69 simulations) 0.1 ended lowest (0.53 of "
        "the start's loss), 0.03 at 0.70, while 0.3 and 1 found nothing below the start: the regularizers and the "
        "keys punish random pushes of every vertex",
    ),
}
ARTIST_LBFGSB_ITERATIONS = 15  # L-BFGS-B takes 10-40× Gauss–Newton's time here: a few iterations show its pace


@dataclasses.dataclass
class Problem:
    """A scene, loss and parameterizations from one simulator package `dc` (core, or the extension's
    diffcloth.core for the artist case), with CMA-ES's sigma0 and why it was picked."""

    name: str
    title: str
    dc: ModuleType
    scene: object
    loss: object
    params: list
    sigma0: float
    sigma0_why: str
    max_iter: dict = dataclasses.field(default_factory=dict)  # method ↦ iterations at most (default 100)
    guess: object = None  # step positions every run's simulations start from (None: from scratch)
    cma_options: dict = dataclasses.field(default_factory=dict)

    def module(self, name):
        return importlib.import_module(f"{self.dc.__name__}.{name}")

    def design(self):
        return self.module("design.params").Design(self.scene, self.params)


# --- the problems ---------------------------------------------------------------------------


def thesis_scene(side=te.N, **kw):
    """thesis_experiments.thesis_scene at any side (side×side vertices on the same 1 m square)."""
    if side == te.N:
        return te.thesis_scene(**kw)
    pins = kw.pop("pinned", [(side - 1) * side, side * side - 1])
    k_tension, k_bending, sphere = kw.pop("k_tension", 20.0), kw.pop("k_bending", 0.1), kw.pop("sphere", False)
    verts, tris = core.grid(side, side, size=1.0)
    cloth = core.Cloth(verts, tris, mass=0.5, k_tension=k_tension, k_bending=k_bending, pinned=pins, bending="springs")
    return core.Scene(
        cloth, steps=kw.pop("steps", 100), dt=0.1, colliders=[te.SPHERE] if sphere else [], contact_stiffness=8e5, **kw
    )


def stiffness_problem(side=te.N, steps=100, true=20.0, start=10.0):
    """Experiment 1: the global tension stiffness from `start` to `true`, the last frame as target."""
    truth = thesis_scene(side, k_tension=true, steps=steps)
    target = core.simulate(truth).x[steps]
    scene = thesis_scene(side, k_tension=start, steps=steps)
    title = f"stiffness: k from {start:g} to {true:g} (1 parameter)"
    loss = core.KeyframeLoss({steps: target})
    max_iter = {"auto": 30, "l-bfgs-b": 30}  # as the thesis experiment
    return Problem("stiffness", title, core, scene, loss, [core.GlobalStiffness()], *SIGMA0["stiffness"], max_iter)


def throw_problem(side=te.N, steps=9):
    """Experiment 5: every initial velocity (mean + per-vertex deviation) of an unpinned cloth thrown
    over the sphere to land on it at frame `steps`, starting at rest."""
    verts, _ = core.grid(side, side)
    x0 = verts + np.array([-0.8, 0.1, 0.0])
    truth = thesis_scene(side, sphere=True, steps=steps, pinned=(), x0=x0, v0=(1.3, 0.0, 2.5), substeps=4)
    target = core.simulate(truth).x[steps]
    params = [core.InitialVelocity(per_vertex=True)]
    title = f"throw: initial velocities ({3 + 3 * side * side} parameters)"
    loss = core.KeyframeLoss({steps: target})
    return Problem("throw", title, core, truth.replace(v0=0.0), loss, params, *SIGMA0["throw"])


def artist_problem(side=32, pose="whole"):
    """artist_match.py's core case: keys posed on a Simulate & Bake (the scene's own steps) at
    frames 24 and 48, the add-on's default KeyedForces (with Move Pins), optimized with converged
    steps started from the motion the keys were posed from."""
    import artist_match as am  # loads the extension into bpy (for the add-on's defaults)

    dc = am.dc
    sc = am.scene(side)
    baked = dc.simulate(sc)  # the simulation the artist poses the keys from
    loss = dc.KeyframeLoss({f: edit(baked.x[f]) for f, edit in am.edits(sc.cloth.pinned, pose).items()})
    controls = am.default_settings()
    controls["move_pins"] = dc.posed_pins(sc, loss) if controls["move_pins"] else False
    params = [dc.KeyedForces(**controls)]
    title = f"artist match {side}×{side}: keyed control ({sum(p.size(sc) for p in params)} parameters)"
    optimized = sc.replace(solver="newton")  # the add-on's Optimize converges every step
    max_iter = {"auto": 100, "l-bfgs-b": ARTIST_LBFGSB_ITERATIONS}
    # a full covariance matrix of 27648² entries does not fit in memory (6 GB), nor its
    # eigendecomposition in time: separable CMA-ES (a diagonal covariance)
    separable = {"CMA_diagonal": True}
    return Problem("artist", title, dc, optimized, loss, params, *SIGMA0["artist"], max_iter, baked.step_x, separable)


def make_problem(name, **kw):
    return {"stiffness": stiffness_problem, "throw": throw_problem, "artist": artist_problem}[name](**kw)


# --- runs -----------------------------------------------------------------------------------


def forward_equivalents(counts, ratios):
    """Forward simulations plus each adjoint/tangent pass weighted by its cost in forwards."""
    return counts.get("forward", 0) + sum(counts.get(k, 0) * ratios.get(k, 0.0) for k in ("adjoint", "tangent"))


def pass_ratios(passes):
    """{kind: a pass's mean seconds over a forward's} from result.passes ({kind: (count, seconds)})."""
    n_f, s_f = passes["forward"]
    per_forward = s_f / max(n_f, 1)
    return {
        k: (passes[k][1] / passes[k][0]) / per_forward if passes[k][0] and per_forward > 0 else 0.0
        for k in ("adjoint", "tangent")
    }


def run_gradient(problem, method="auto", label=None, max_iter=None):
    """problem solved by core.optimize with `method`: a dict with the final loss, the passes, their
    cost in forwards and the trace [[forward-equivalents, seconds, best loss so far], ...]: the start,
    one point per iteration and the end."""
    points = []  # (cumulative counts after the iteration, seconds, best loss)
    cumulative = {"forward": 0, "adjoint": 0, "tangent": 0}

    def callback(info):
        for kind, key in (("forward", "evaluations"), ("adjoint", "adjoints"), ("tangent", "tangents")):
            cumulative[kind] += info[key]
        points.append((dict(cumulative), time.perf_counter() - t0, info["loss"]))

    t0 = time.perf_counter()
    result = problem.dc.optimize(
        problem.scene,
        problem.loss,
        problem.params,
        max_iter=max_iter or problem.max_iter.get(method, 100),
        method=method,
        callback=callback,
        guess=problem.guess,
    )
    seconds = time.perf_counter() - t0
    passes = {k: (int(c), float(s)) for k, (c, s) in result.passes.items()}
    ratios = pass_ratios(passes)
    # what the start cost: one simulation, and for L-BFGS-B its gradient (the first iteration's
    # own passes are counted in the history); whatever ran after the last iteration closes the trace
    start = {"forward": 1, "adjoint": 1 if result.method == "l-bfgs-b" else 0, "tangent": 0}
    trace = [[forward_equivalents(start, ratios), None, result.initial_loss]]
    for counts, s, loss in points:
        trace.append([forward_equivalents({k: counts[k] + start[k] for k in counts}, ratios), s, loss])
    total = {k: c for k, (c, _) in passes.items()}
    trace.append([forward_equivalents(total, ratios), seconds, result.loss])
    # the start's seconds are not seen apart from the first iteration's: its simulations' worth of a
    # forward's mean seconds
    trace[0][1] = min(trace[0][0] * passes["forward"][1] / max(passes["forward"][0], 1), trace[1][1])
    return dict(
        method=label or result.method,
        optimizer=result.method,
        initial_loss=result.initial_loss,
        final_loss=result.loss,
        simulations=round(forward_equivalents(total, ratios), 2),
        forwards=total["forward"],
        adjoints=total["adjoint"],
        tangents=total["tangent"],
        iterations=len(result.history),
        max_iter=max_iter or problem.max_iter.get(method, 100),
        passes=passes,
        pass_cost_in_forwards={k: round(v, 3) for k, v in ratios.items()},
        start_passes=start,
        seconds=round(seconds, 2),
        reason=result.reason,
        trace=trace,
    )


class ObjectiveValue:
    """θ ↦ keyframe loss + regularizers (core.design.optimize.Objective's value, without its gradient) by
    one forward simulation; a simulation that fails scores 1e3 × the start's loss + 1 (as
    core.optimize's L-BFGS-B scores a diverged trial). Records every evaluation."""

    def __init__(self, problem):
        self.problem, self.design = problem, problem.design()
        self.simulate = problem.dc.simulate
        self.error = problem.dc.SimulationError
        self.values, self.failures, self.penalty = [], 0, None

    def __call__(self, theta):
        scene = self.design.scene(np.asarray(theta, dtype=np.float64))
        try:
            traj = self.simulate(scene, guess=self.problem.guess)
        except self.error:
            self.failures += 1
            value = self.penalty if self.penalty is not None else math.inf
        else:
            value = self.problem.loss.evaluate(traj.x, traj.v)[0] + self.design.regularizer(theta)[0]
        if self.penalty is None:
            self.penalty = 1e3 * value + 1.0
        self.values.append(value)
        return value


def cma_bounds(bounds):
    """Design.bounds ([(lo, hi)] with None for open) as cma's [lower, upper], or None if unbounded."""
    if all(b == (None, None) for b in bounds):
        return None
    return [[-np.inf if lo is None else lo for lo, _ in bounds], [np.inf if hi is None else hi for _, hi in bounds]]


def run_cma(problem, budget, seed=1, sigma0=None):
    """problem solved by CMA-ES (cma.CMAEvolutionStrategy from the design's start, sigma0, the design's
    bounds, its defaults otherwise) until `budget` evaluations (cma's maxfevals: it ends the
    generation that passes it) or its own termination. Trace: every evaluation."""
    import cma

    f = ObjectiveValue(problem)
    design = f.design
    sigma0 = problem.sigma0 if sigma0 is None else sigma0
    # cma stops once countevals - 1 >= maxfevals; the start is one more simulation
    options = dict(problem.cma_options, maxfevals=max(budget - 2, 1), seed=seed, verbose=-9)
    bounds = cma_bounds(design.bounds)
    if bounds is not None:
        options["bounds"] = bounds
    Clock = problem.module("numerics.timing").Clock
    threads = problem.module("numerics.threads")
    trace = []
    t0 = time.perf_counter()

    @threads.one_blas_thread
    def solve():
        # the start is simulated first, as the gradient methods' (and counted): it scores failed
        # simulations and is the first best design
        best = f(design.theta0)
        trace.append([1, time.perf_counter() - t0, best])
        es = cma.CMAEvolutionStrategy(design.theta0, sigma0, options)
        while not es.stop():
            X = es.ask()
            values = []
            for x in X:
                values.append(f(x))
                best = min(best, values[-1])
                trace.append([len(f.values), time.perf_counter() - t0, best])
            es.tell(X, values)
        return es, best

    with Clock() as clock:
        es, best = solve()
    seconds = time.perf_counter() - t0
    forwards, forward_s = clock.counts.get("forward", 0), clock.seconds.get("forward", 0.0)
    return dict(
        method=CMA_LABEL,
        optimizer="cma",
        sigma0=sigma0,
        sigma0_why=problem.sigma0_why,
        options={k: ("given" if k == "bounds" else v) for k, v in options.items() if k != "verbose"},
        popsize=es.popsize,
        initial_loss=f.values[0],
        final_loss=best,
        simulations=len(f.values),
        forwards=forwards,
        evaluations=es.countevals + 1,
        failed_simulations=f.failures,
        generations=es.countiter,
        passes={"forward": (forwards, forward_s)},
        seconds=round(seconds, 2),
        reason=", ".join(f"{k}={v}" for k, v in es.stop().items()),
        trace=trace,
    )


# --- what the runs show ---------------------------------------------------------------------


def reach(trace, level):
    """(forward-equivalents, seconds) at which a trace's best loss is first at or below `level`."""
    for sims, seconds, loss in trace:
        if loss <= level * (1 + 1e-9):
            return sims, seconds
    return None


REDUCTIONS = (10, 100, 1e3, 1e6)  # the loss levels compared: the start's loss over these, where reached


def loss_levels(runs):
    """The losses every method's cost is compared at (highest first): the start's over each of
    REDUCTIONS that some method reaches, CMA-ES's best, and the best gradient method's final
    loss where it lies above the last reduction."""
    initial = runs[0]["initial_loss"]
    reached = min(r["final_loss"] for r in runs)
    levels = {f"reduced_{f:g}": initial / f for f in REDUCTIONS if initial / f >= reached}
    levels["cma_best"] = min(r["final_loss"] for r in runs if r["optimizer"] == "cma")
    gradient = min(r["final_loss"] for r in runs if r["optimizer"] != "cma")
    if gradient > initial / REDUCTIONS[-1]:
        levels["gradient_best"] = gradient
    return dict(sorted(levels.items(), key=lambda kv: -kv[1]))


def level_name(key):
    if key.startswith("reduced_"):
        return f"{float(key[8:]):g}× lower"
    return {"cma_best": "CMA-ES's best", "gradient_best": "the gradient methods' best"}[key]


def summarize(problem_name, title, runs, parameters):
    """Adds each run's cost to reach the shared loss levels; returns the JSON lines' dicts."""
    levels = loss_levels(runs)
    out = []
    for r in runs:
        hit = {
            name: (
                None
                if (p := reach(r["trace"], level)) is None
                else {"loss": level, "simulations": round(p[0], 1), "seconds": round(p[1], 2)}
            )
            for name, level in levels.items()
        }
        out.append(
            dict(
                problem=problem_name,
                title=title,
                parameters=parameters,
                **{k: v for k, v in r.items() if k != "trace"},
                levels=levels,
                reach=hit,
                trace=r["trace"],
            )
        )
    return out


def run_problem(problem, factor=FACTOR, cap=None, seed=1, methods=GRADIENT_METHODS, max_iter=None, log=print):
    """The gradient methods (each to max_iter iterations, default the problem's), then CMA-ES with
    `factor` times their largest count of simulations (at most `cap`): the JSON lines' dicts."""
    parameters = int(len(problem.design().theta0))
    runs = []
    for method, label in methods:
        runs.append(run_gradient(problem, method, label, max_iter))
        log(
            f"{problem.name}: {label}: loss {runs[-1]['final_loss']:.3e} in {runs[-1]['simulations']:.0f} "
            f"simulations, {runs[-1]['seconds']:.1f} s"
        )
    budget = int(math.ceil(factor * max(r["simulations"] for r in runs)))
    if cap is not None:
        budget = min(budget, cap)
    runs.append(run_cma(problem, budget, seed))
    runs[-1]["budget"] = budget
    log(
        f"{problem.name}: {CMA_LABEL}: loss {runs[-1]['final_loss']:.3e} in {runs[-1]['simulations']} "
        f"simulations, {runs[-1]['seconds']:.1f} s"
    )
    return summarize(problem.name, problem.title, runs, parameters)


# --- the figure and the table ---------------------------------------------------------------

FLOOR = 1e-12  # the plots' lowest relative loss: below it, rounding noise
COLORS = {"Gauss–Newton (default)": "tab:blue", "L-BFGS-B": "tab:green", CMA_LABEL: "tab:red"}


def plot(lines, path):
    """Best loss (relative to the start's) against simulations (top) and seconds (bottom), one
    column per problem, log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    problems = list(dict.fromkeys(line["problem"] for line in lines))
    fig, axes = plt.subplots(2, len(problems), figsize=(4.6 * len(problems), 7.2), squeeze=False)
    for col, name in enumerate(problems):
        runs = [line for line in lines if line["problem"] == name]
        initial = runs[0]["initial_loss"]
        for row, (index, xlabel) in enumerate(((0, "simulations (forward-equivalents)"), (1, "seconds"))):
            ax = axes[row, col]
            for r in runs:
                x = np.array([p[index] for p in r["trace"]], dtype=float)
                y = np.maximum(np.array([p[2] for p in r["trace"]]) / initial, FLOOR)
                color = COLORS.get(r["method"])
                ax.step(x, y, where="post", color=color, lw=1.6, label=r["method"])
                ax.plot(x[-1], y[-1], "o", color=color, ms=6, mfc="none")  # where it ended
            for level in runs[0]["levels"].values():
                ax.axhline(level / initial, color="0.8", lw=0.8, ls=":", zorder=0)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(xlabel)
            ax.grid(True, which="major", color="0.92")
            if col == 0:
                ax.set_ylabel("best loss / start's loss")
            if row == 0:
                ax.set_title(runs[0]["title"], fontsize=10)
                if col == 0:
                    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _times(ratio):
    """A factor for the reader: 2 significant digits, and beyond 1e12 (rounding noise) just that."""
    return "more than 10¹²×" if ratio > 1e12 else f"{ratio:.2g}×"


def _cost(hit):
    return "not reached" if hit is None else f"{hit['simulations']:.0f} / {hit['seconds']:.1f} s"


def findings(runs):
    """A reader's sentences on one problem's runs: who reached CMA-ES's best loss, at what cost."""
    cma_run = next(r for r in runs if r["optimizer"] == "cma")
    grads = [r for r in runs if r["optimizer"] != "cma"]
    initial = runs[0]["initial_loss"]
    at = cma_run["reach"]["cma_best"]
    text = [
        f"CMA-ES ended {_times(initial / cma_run['final_loss'])} below the start's loss after "
        f"{cma_run['simulations']} simulations ({cma_run['seconds']:.0f} s), reaching that loss first after "
        f"{at['simulations']:.0f} ({at['seconds']:.0f} s)."
    ]
    for r in grads:
        hit = r["reach"]["cma_best"]
        if hit is None:
            text.append(
                f"{r['method']} did not get down to it: it stopped {_times(initial / r['final_loss'])} below "
                f"the start after {r['simulations']:.0f} simulations ({r['seconds']:.0f} s)."
            )
        else:
            text.append(
                f"{r['method']} got there after {hit['simulations']:.0f} simulations ({hit['seconds']:.1f} s), "
                f"{_times(at['simulations'] / max(hit['simulations'], 1e-9))} fewer than CMA-ES "
                f"({_times(at['seconds'] / max(hit['seconds'], 1e-9))} less time), and ended "
                f"{_times(initial / r['final_loss'])} below the start, "
                f"{_times(cma_run['final_loss'] / r['final_loss'])} lower than CMA-ES's best."
            )
    return " ".join(text)


def summary(lines, problems):
    """One bullet per problem: the simulations CMA-ES and the faster gradient method needed to reach
    CMA-ES's best loss."""
    out = ["**In short.**", ""]
    for name in problems:
        runs = [line for line in lines if line["problem"] == name]
        cma_run = next(r for r in runs if r["optimizer"] == "cma")
        at = cma_run["reach"]["cma_best"]
        hits = [
            (r["reach"]["cma_best"]["simulations"], r["method"])
            for r in runs
            if r["optimizer"] != "cma" and r["reach"]["cma_best"] is not None
        ]
        if not hits:
            out.append(f"- {runs[0]['title']}: no gradient method reached CMA-ES's best loss.")
            continue
        sims, method = min(hits)
        out.append(
            f"- {runs[0]['title']}: CMA-ES's best loss ({cma_run['final_loss'] / runs[0]['initial_loss']:.2g} "
            f"of the start's) took it {at['simulations']:.0f} simulations, {method} {sims:.0f} "
            f"({_times(at['simulations'] / max(sims, 1e-9))} fewer)."
        )
    return out


def markdown(lines, png_name, quiet=None):
    """docs/vs_cma.md: per problem, the simulations and seconds each method needs to reach the same losses."""
    problems = list(dict.fromkeys(line["problem"] for line in lines))
    out = ["# Gradients against CMA-ES", ""]
    out += [
        "How many simulations does each method need to reach the same loss? Three of this project's problems, "
        "each solved by its optimizer (`core.optimize`: Gauss–Newton, its default for keyframe losses, and "
        "L-BFGS-B) and by gradient-free CMA-ES (Hansen's `cma` package with its default settings), with the same "
        "parameters, bounds and objective (keyframe loss plus the control's regularizers), from the same start. "
        "Made by `benchmarks/vs_cma.py`, after the comparison with CMA-ES in the supplement of a differentiable "
        "soft/rigid-body simulation paper.",
        "",
        "Every simulation counts. For CMA-ES one evaluation is one forward simulation (the start's included). For "
        "the gradient methods the count is every forward simulation they ran (line-search and trial runs "
        "included, and trials cut short once they were worse) plus each adjoint or tangent pass weighted by what "
        "it costs: its mean seconds over a forward simulation's mean seconds in the same run. Seconds are wall "
        "time on one core, everything included (CMA-ES's own updates, the optimizers' linear algebra). The gradient "
        "methods run to their own stopping rules, except L-BFGS-B on the artist match, limited to "
        f"{ARTIST_LBFGSB_ITERATIONS} iterations (to its own stop it needs 10–40× Gauss–Newton's time there); CMA-ES "
        f"gets {FACTOR:g}× the larger of their simulation counts, capped per problem to keep the run near 20 minutes.",
        "",
        f"![best loss against simulations and seconds]({png_name})",
        "",
        "**What the plot shows.** One column per problem. Top: the best loss found so far, relative to the "
        "start's, against the simulations spent (both axes logarithmic); bottom: the same against seconds. A "
        "circle marks where each run ended; the dotted lines are the loss levels of the tables; losses below 10⁻¹² of the "
        "start's (rounding) are drawn at 10⁻¹². A curve further "
        "left reaches a loss with fewer simulations. CMA-ES learns only from how its samples rank, so its "
        "progress per simulation shrinks as the parameters grow in number, while one adjoint pass gives the "
        "derivative in all parameters, and Gauss–Newton's tangent and adjoint passes give the curvature along a "
        "few directions. A pass costs a fraction of a simulation (a hundredth to a quarter here, least where contact "
        "makes each step of a simulation take many Newton iterations): it solves one linear system per step with "
        "the matrices the simulation left behind.",
        "",
    ]
    out += summary(lines, problems) + [""]
    for name in problems:
        runs = [line for line in lines if line["problem"] == name]
        levels = runs[0]["levels"]
        initial = runs[0]["initial_loss"]
        out += [f"## {runs[0]['title']}", "", findings(runs), ""]
        header = "| method | final loss / start's | simulations | seconds |"
        rule = "|---|---|---|---|"
        for key, level in levels.items():
            header += f" to {level_name(key)} ({level / initial:.2g}): simulations / seconds |"
            rule += "---|"
        out += [header, rule]
        for r in runs:
            row = f"| {r['method']} | {r['final_loss'] / initial:.2e} | {r['simulations']:.0f} | {r['seconds']:.0f} |"
            out.append(row + "".join(f" {_cost(r['reach'][key])} |" for key in levels))
        cma_run = next(r for r in runs if r["optimizer"] == "cma")
        notes = [
            f"CMA-ES: population {cma_run['popsize']}, sigma0 = {cma_run['sigma0']:g} ({cma_run['sigma0_why']}); "
            f"{cma_run['simulations']} simulations for a budget of {cma_run['budget']} (checked between generations)"
            + (
                ", separable (a diagonal covariance: a full one of this size does not fit in memory)"
                if cma_run["options"].get("CMA_diagonal")
                else ""
            )
            + f"; a simulation took {cma_run['passes']['forward'][1] / max(cma_run['forwards'], 1):.2f} s "
            f"on average; it stopped on {cma_run['reason']}."
        ]
        for r in (r for r in runs if r["optimizer"] != "cma"):
            cost = r["pass_cost_in_forwards"]
            n_f, s_f = r["passes"]["forward"]
            notes.append(
                f"{r['method']}: {r['iterations']} iterations, {r['forwards']} forward simulations "
                f"({s_f / max(n_f, 1):.2f} s on average), {r['adjoints']} adjoint passes (each "
                f"{cost['adjoint']:.2f} simulations)"
                + (f", {r['tangents']} tangent passes (each {cost['tangent']:.2f})" if r["tangents"] else "")
                + (
                    f"; it stopped at its limit of {r['max_iter']} iterations"
                    if r["reason"] == "max_iter"
                    else f"; it stopped: {r['reason']}"
                )
                + "."
            )
        out += [""] + [f"- {n}" for n in notes] + [""]
    environment = lines[0].get("environment")
    if environment or quiet:
        out += [" ".join(filter(None, [quiet, environment and f"Versions: {environment}."])), ""]
    return "\n".join(out)


def environment_line():
    import platform

    import cma
    import scipy

    return (
        f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}, cma {cma.__version__}"
    )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", nargs="+", default=list(PROBLEMS), choices=PROBLEMS)
    ap.add_argument(
        "--factor", type=float, default=FACTOR, help="CMA-ES budget over the gradient methods' largest count"
    )
    ap.add_argument(
        "--cap", nargs="*", default=[], metavar="PROBLEM=N", help="CMA-ES budget caps (default %(default)s)"
    )
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=str(HERE.parent / "docs" / "vs_cma"), help="writes OUT.png and OUT.md")
    ap.add_argument("--replot", metavar="JSONL", help="redraw the figure and table from saved JSON lines")
    ap.add_argument("--quiet-note", help="how quiet the machine was, for the table's last line")
    args = ap.parse_args()
    caps = dict(CAPS, **{k: int(v) for k, v in (c.split("=") for c in args.cap)})
    if args.replot:
        lines = [
            json.loads(line) for line in pathlib.Path(args.replot).read_text().splitlines() if line.startswith("{")
        ]
    else:
        lines = []
        environment = environment_line()
        for name in args.problems:
            for line in run_problem(
                make_problem(name),
                args.factor,
                caps.get(name),
                args.seed,
                log=lambda s: print(s, file=sys.stderr, flush=True),
            ):
                line["environment"] = environment
                lines.append(line)
                print(json.dumps(line), flush=True)
    out = pathlib.Path(args.out)
    plot(lines, out.with_suffix(".png"))
    out.with_suffix(".md").write_text(markdown(lines, out.with_suffix(".png").name, args.quiet_note))


if __name__ == "__main__":
    main()
