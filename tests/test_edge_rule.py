"""The edge rule (rffor.edge_rule): one axis, one predicate, one status vocabulary, two searches."""

from __future__ import annotations

import numpy as np
import pytest

from rffor.edge_rule import Axis, improves, select_widening, walk


def _score(f):
    calls = []

    def score(v, came_from):
        calls.append((v, came_from))
        return f(v)

    return score, calls


def test_walk_reaches_an_interior_minimum_past_the_grid_and_steps_from_its_neighbour():
    # minimum at λ = 1e-7, a grid ending at 1e-4: the walk continues past the end by decades
    score, calls = _score(lambda v: (np.log10(v) + 7) ** 2 + 1)
    w = walk(Axis((1e-2, 1e-3, 1e-4), step=None), 1e-3, score)
    assert w.best == pytest.approx(1e-7) and w.status == "interior"
    assert w.scores[1e-8] > w.score and w.scores[w.best * 10] > w.score  # both neighbours scored
    assert all(prev is None or abs(np.log10(v / prev)) < 1.01 for v, prev in calls)  # warm starts from a neighbour


def test_walk_keeps_the_first_of_values_within_the_plateau_and_says_flat():
    # decreasing by 0.5% per step below 1e-3: not worth a step
    w = walk(Axis((1e-3,)), 1e-3, lambda v, _: 1.0 + 0.5e-2 * np.log10(v))
    assert w.best == 1e-3 and w.status == "flat low"


def test_walk_stops_at_a_natural_limit_and_lands_on_it():
    axis = Axis((1.0, 10.0), step=None, low=0.05)
    w = walk(axis, 10.0, lambda v, _: v)  # always better lower
    assert w.best == 0.05 and w.status == "low limit" and "down: a limit" in w.trail[-1]


def test_neighbours_past_the_end_are_rounded_so_a_step_back_returns_the_same_float():
    axis = Axis((100 / 0.7**2,), step=10**0.5)
    v = 100 / 0.7**2
    for d in (-1, 1):
        w = axis.neighbour(v, d)
        assert axis.neighbour(w, -d) == v and axis.neighbour(axis.neighbour(w, d), -d) == w


def test_integer_axis_widens_outwards_at_least_one_apart():
    axis = Axis((2, 3), step=1.5, low=1, high=6, integer=True)
    assert axis.neighbour(3, +1) == 5 and axis.neighbour(5, +1) == 6 and axis.neighbour(6, +1) is None
    assert axis.neighbour(2, -1) == 1 and axis.neighbour(1, -1) is None


def test_improves_is_the_one_predicate():
    assert improves(0.99, 1.0) and not improves(0.995, 1.0) and improves(0.5, 1.0, plateau=0.5)


def test_widening_keeps_an_edge_it_gave_up_on_or_raises():
    def evaluate(cands):
        return [{"r": [c["lam"]]} for c in cands]  # always better lower

    with pytest.raises(RuntimeError, match="widenings"):
        select_widening(evaluate, {"lam": Axis((1.0, 10.0))}, reduce={"r": np.mean}, max_widen=2)
    sel = select_widening(evaluate, {"lam": Axis((1.0, 10.0))}, reduce={"r": np.mean}, max_widen=2, on_edge="keep")
    assert sel.edges["r"]["lam"] == "low edge" and sel.best["r"]["lam"] == pytest.approx(0.01)
    assert sel.widened == ["lam low: 0.1", "lam low: 0.01"]
