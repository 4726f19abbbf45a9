"""The benchmarks' edge rule (benchmarks/_common.py, select_widening and cv_select_widening, its K-fold form): a
selection at the edge of a grid widens the grid, a flat score or a natural limit stops the widening and is reported,
anything else fails loudly.

The candidates' scores are set by hand: ``fit_predict`` predicts a constant c on zero validation curves, so a fold's
NMSE (and curve-median MSE) is c², the same on every fold.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

# Loaded by path: putting benchmarks/ on sys.path would let a script named like a package shadow it.
_spec = importlib.util.spec_from_file_location(
    "_bench_common", Path(__file__).resolve().parents[1] / "benchmarks" / "_common.py"
)
_common = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _common  # dataclasses resolve their module through sys.modules
_spec.loader.exec_module(_common)
Axis, cv_select_widening, edge_counts, select_widening, widening_text = (
    _common.Axis,
    _common.cv_select_widening,
    _common.edge_counts,
    _common.select_widening,
    _common.widening_text,
)

X, Y = np.zeros((20, 2)), np.zeros((20, 3))


def scored(score):
    """fit_predict whose every validation fold scores ``score(params)``."""

    def fit_predict(params, X_train, Y_train, X_valid):
        return np.full((len(X_valid), Y.shape[1]), math.sqrt(score(params)))

    return fit_predict


def test_a_minimum_past_the_grid_is_found_and_interior():
    # the score's minimum is at λ = 1e-12, six decades below the starting grid
    sel = cv_select_widening(
        scored(lambda p: (math.log10(p["lam"]) + 12) ** 2 + 1),
        {"lam": Axis((1e-6, 1e-4, 1e-2))},
        X,
        Y,
        n_splits=4,
        max_widen=7,
    )
    assert sel.best["mean"]["lam"] == pytest.approx(1e-12)
    assert sel.edges["mean"] == {"lam": "interior"}
    assert sel.grids["lam"][0] == pytest.approx(1e-13) and sel.grids["lam"][-1] == 1e-2
    assert len(sel.widened) == 7 and all(w.startswith("lam low") for w in sel.widened)


def test_widening_combines_the_new_value_with_every_value_of_the_other_axes():
    # κ's best value 0.3 is at its high edge; λ's (1e-3) is interior
    calls = []

    def score(p):
        calls.append((p["lam"], p["kappa"]))
        return (math.log10(p["lam"]) + 3) ** 2 + (math.log10(p["kappa"]) - math.log10(0.3)) ** 2 + 1

    sel = cv_select_widening(scored(score), {"lam": Axis((1e-4, 1e-3, 1e-2)), "kappa": Axis((0.01, 0.1), step=3)},
                             X, Y, n_splits=2)  # fmt: skip
    assert sel.best["mean"] == {"lam": 1e-3, "kappa": pytest.approx(0.3)}
    assert sel.edges["mean"] == {"lam": "interior", "kappa": "interior"}
    assert sel.grids["kappa"] == pytest.approx([0.01, 0.1, 0.3, 0.9])
    # every candidate fitted once per fold: 3 λ x 4 κ x 2 folds
    assert len(calls) == 24 and len(set(calls)) == 12


def test_a_flat_score_past_the_edge_stops_and_says_so():
    # the score keeps decreasing towards λ = 0 but by less than 1% per decade below 1e-6
    sel = cv_select_widening(scored(lambda p: 1 + p["lam"]), {"lam": Axis((1e-6, 1e-4, 1e-2))}, X, Y, n_splits=3)
    assert sel.edges["mean"] == {"lam": "flat low"}
    assert sel.grids["lam"][0] == pytest.approx(1e-7)  # widened once, then judged flat
    assert edge_counts([sel.edges["mean"], {"lam": "interior"}]) == "λ flat low 1/2"


def test_a_natural_limit_is_reported_not_crossed():
    # more components always help a little; 5 is the most the folds allow
    axes = {"n_components": Axis((1, 2, 3), step=1.5, low=1, high=5, integer=True)}
    sel = cv_select_widening(scored(lambda p: 10 - p["n_components"]), axes, X, Y, n_splits=2)
    assert sel.best["mean"] == {"n_components": 5} and sel.grids["n_components"] == [1, 2, 3, 5]
    assert sel.edges["mean"] == {"n_components": "high limit"}
    assert "components ∈ {1, 2, 3} (widened up to 5 in 1 of 1 selections)" == widening_text(axes, [sel.grids])


def test_an_edge_that_keeps_improving_fails_loudly():
    with pytest.raises(RuntimeError, match="low edge of lam after 3 widenings"):
        cv_select_widening(scored(lambda p: p["lam"]), {"lam": Axis((1e-2, 1e-1))}, X, Y, n_splits=2, max_widen=3)


def test_every_rule_gets_its_own_widening():
    # the robust rule (median over validation curves) ignores 4 outlying curves that the mean rule sees
    Y_out = np.zeros((20, 3))
    Y_out[:4] = 100.0

    def fit_predict(p, X_train, Y_train, X_valid):
        # a "model" whose λ moves its prediction between the bulk (0) and the outliers (Y_train's mean)
        return np.full((len(X_valid), 3), Y_train.mean() * (1 - p["lam"]))

    sel = cv_select_widening(fit_predict, {"lam": Axis((0.3, 0.9), step=1.1, high=1.0)}, X, Y_out,
                             rules=("mean", "robust"), n_splits=5)  # fmt: skip
    assert sel.best["robust"]["lam"] == 1.0 and sel.edges["robust"] == {"lam": "high limit"}
    assert sel.best["mean"]["lam"] < 1.0


def test_a_limit_reached_by_rounding_is_the_limit():
    # 1e-8 / 10**6 is 1.0000000000000001e-14 or so: the widening must stop at the limit itself, not next to it
    axes = {"lam": Axis((1e-8, 1e-6), low=1e-14)}
    sel = cv_select_widening(scored(lambda p: 1 + math.log10(p["lam"]) + 20), axes, X, Y, n_splits=2)
    assert sel.grids["lam"][0] == 1e-14 and sel.grids["lam"][1] == pytest.approx(1e-13)
    assert sel.best["mean"] == {"lam": 1e-14} and sel.edges["mean"] == {"lam": "low limit"}


def test_select_widening_scores_every_candidate_once_in_batches():
    # a caller's evaluate gets the starting grid at once, then each widening's new candidates (a λ path per γ)
    batches = []

    def evaluate(candidates):
        batches.append([(c["gx"], c["lam"]) for c in candidates])
        return [{"pinball": [(math.log10(c["lam"]) + 5) ** 2 + math.log10(c["gx"]) ** 2 + 1] * 3} for c in candidates]

    sel = select_widening(
        evaluate, {"gx": Axis((0.1, 1.0, 10.0)), "lam": Axis((1e-2, 1e-3))}, reduce={"pinball": np.mean}
    )
    assert sel.best["pinball"] == {"gx": 1.0, "lam": pytest.approx(1e-5)}
    assert sel.edges["pinball"] == {"gx": "interior", "lam": "interior"}
    assert [len(b) for b in batches] == [6, 3, 3, 3]  # 3 γ x 2 λ, then 3 γ x each new λ (1e-4, 1e-5, 1e-6)
    flat = [x for b in batches for x in b]
    assert len(set(flat)) == len(flat) == 15


def test_an_integer_axis_stops_at_its_low_limit():
    # smaller leaves always help: 2 -> 1 (2 / 4 rounded down would be 0, past the limit 1), then "low limit"
    sel = select_widening(
        lambda cands: [{"r": [float(c["leaf"])]} for c in cands],
        {"leaf": Axis((2, 8, 32), step=4, low=1, integer=True)},
        reduce={"r": np.mean},
    )
    assert sel.best["r"] == {"leaf": 1} and sel.grids["leaf"] == [1, 2, 8, 32]
    assert sel.edges["r"] == {"leaf": "low limit"}


def test_a_rule_whose_every_candidate_fails_is_an_error():
    with pytest.raises(RuntimeError, match="every candidate failed"):
        select_widening(lambda cands: [{"r": [np.inf]} for _ in cands], {"a": Axis((1.0, 2.0))}, reduce={"r": np.mean})
