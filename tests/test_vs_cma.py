"""Smoke test of benchmarks/vs_cma.py (gradients against CMA-ES) on tiny problems and budgets."""

import math
import pathlib
import sys

import pytest

pytest.importorskip("cma")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "benchmarks"))
import vs_cma  # noqa: E402

from diffcloth.core.design.optimize import Objective  # noqa: E402


@pytest.fixture(scope="module")
def stiffness():
    return vs_cma.stiffness_problem(side=6, steps=15)


@pytest.fixture(scope="module")
def throw():
    """The throw with a 4×4 cloth: 3 + 48 = 51 velocity components."""
    return vs_cma.throw_problem(side=4)


def test_objective_value_is_the_gradient_methods_objective(stiffness):
    design = stiffness.design()
    theta = design.theta0 + 0.3
    value = vs_cma.ObjectiveValue(stiffness)(theta)
    assert value == pytest.approx(Objective(design, stiffness.loss)(theta)[0], rel=1e-12)


def test_both_methods_run_and_count_every_simulation(stiffness):
    grad = vs_cma.run_gradient(stiffness, "auto", max_iter=5)
    assert grad["optimizer"] == "gauss-newton" and grad["final_loss"] < grad["initial_loss"]
    # every pass counts: the forwards, and the adjoint and tangent passes at their measured cost
    assert grad["forwards"] == grad["passes"]["forward"][0] >= grad["iterations"] + 1
    assert grad["adjoints"] >= grad["iterations"] and grad["tangents"] >= 1
    assert all(c > 0 for c in grad["pass_cost_in_forwards"].values())
    # from the passes' own seconds: the reported costs are rounded to 3 decimals, and that rounding
    # times a dozen passes exceeds the count's own rounding to 2 decimals
    cost = vs_cma.pass_ratios(grad["passes"])
    assert grad["simulations"] == pytest.approx(
        grad["forwards"] + grad["adjoints"] * cost["adjoint"] + grad["tangents"] * cost["tangent"], abs=0.006
    )
    assert grad["simulations"] > grad["forwards"]
    sims = [p[0] for p in grad["trace"]]
    assert sims == sorted(sims) and sims[-1] == pytest.approx(grad["simulations"], abs=0.01)
    losses = [p[2] for p in grad["trace"]]
    assert losses[0] == grad["initial_loss"] and losses[-1] == grad["final_loss"] == min(losses)

    es = vs_cma.run_cma(stiffness, budget=12, seed=3)
    # one simulation per evaluation (the start's included), and the budget holds to within a generation
    assert es["simulations"] == es["evaluations"] == es["forwards"] == len(es["trace"])
    assert 12 <= es["simulations"] < 12 + es["popsize"]
    assert es["initial_loss"] == pytest.approx(grad["initial_loss"], rel=1e-9)
    assert [p[0] for p in es["trace"]] == list(range(1, es["simulations"] + 1))
    assert es["final_loss"] == min(p[2] for p in es["trace"]) <= es["initial_loss"]


def test_gradients_beat_cma_es_for_the_same_budget(throw):
    assert len(throw.design().theta0) == 51
    # Gauss–Newton for 5 iterations, then CMA-ES with as many simulations
    lines = vs_cma.run_problem(
        throw, factor=1.0, methods=[("auto", "Gauss–Newton (default)")], max_iter=5, log=lambda s: None
    )
    runs = {line["method"]: line for line in lines}
    es = runs[vs_cma.CMA_LABEL]
    gn = runs["Gauss–Newton (default)"]
    assert es["budget"] == math.ceil(max(line["simulations"] for line in lines if line["optimizer"] != "cma"))
    assert es["simulations"] >= es["budget"]
    # Gauss–Newton reaches CMA-ES's best in a fraction of the simulations, and ends far below it
    assert gn["final_loss"] < 1e-3 * es["final_loss"]
    assert gn["reach"]["cma_best"]["simulations"] < 0.5 * es["simulations"]
    table = vs_cma.markdown(lines, "x.png")
    assert "CMA-ES" in table and "| Gauss–Newton (default) |" in table
