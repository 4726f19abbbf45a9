"""The edge rule: how rffor chooses a hyperparameter on a grid, and how every method compared with it is chosen.

A grid is a starting guess. A selection that lands on an edge of its grid means the grid was too narrow, so the
grid is **extended past that edge** (a value past the end, at the grid's own ratio), and a value is only accepted
where the score has been compared with both of its neighbours. One :class:`Axis` says what values a hyperparameter
may take; one predicate says when a step is worth taking (:func:`improves`: the score falls by at least ``plateau``,
1%); every selection ends with a status per axis:

- ``"interior"``: both neighbours of the selected value were scored and neither is better;
- ``"flat low"`` / ``"flat high"``: the neighbour on that side is better by less than ``plateau`` (the score is
  flat there: extending further is not worth it);
- ``"low limit"`` / ``"high limit"``: the selected value is at a natural limit of the axis (nothing exists past it);
- ``"low edge"`` / ``"high edge"``: the search gave up extending that side while the score still improved (only
  after ``max_widen`` extensions; callers warn or fail).

Two searches share the axis, the predicate and the statuses:

- :func:`walk`, for candidates that cost a fit each (the held-out selection of the random-feature path,
  :mod:`rffor.solvers.selection`): from a start value, step to the neighbouring value while a step improves the
  score; if the first step in one direction does not, try the other;
- :func:`select_widening`, for candidates scored in batches (K-fold cross-validation of the exact path,
  :mod:`rffor.model_selection`, and of every baseline in ``benchmarks/``): the product of the axes' grids is scored,
  and an axis whose selection sits at an end gets one more value past it, until every axis is interior, flat or at
  a limit.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

__all__ = [
    "PLATEAU",
    "SIGNIFICANCE",
    "MIN_FALL",
    "BOOTSTRAP_SAMPLES",
    "MIDMEAN_CUT",
    "STATISTICS",
    "score_statistic",
    "held_out_statistic",
    "Axis",
    "improves",
    "paired_gain",
    "significantly_better",
    "walk",
    "Walk",
    "select_widening",
    "Selection",
]

#: a step is taken (an extension counts as an improvement) when it lowers the score by at least this fraction
PLATEAU = 0.01

#: a step of a walk scored on held-out curves is taken when it lowers the score by more than this many standard
#: errors of that fall (:func:`significantly_better`). 0: any fall of the held-out score. Set by a design study of
#: the rule (benchmarks/learning_curve.py ``--rules``, seed 1, never the seed of the reported learning curve),
#: scored by the ratio of each selected model's clean test NMSE to the best model of a fixed (λ, κ) grid: on noisy
#: curves (noise 1% of the signal's energy, 10% Type 2 outliers) 0 standard errors came closest to that oracle and
#: 1, 2 stopped early (benchmarks/README.md, "The selection rule before and after")
SIGNIFICANCE = 0.0

#: a fall of a held-out score smaller than this fraction of it is rounding (two models the data cannot tell apart,
#: e.g. λ = 1e-28 and 1e-30 on noise-free curves), never a step of :func:`significantly_better`
MIN_FALL = 1e-6

#: resamples of the held-out curves behind the standard error of :func:`paired_gain`
BOOTSTRAP_SAMPLES = 200

#: fraction cut from each end of the sorted per-curve errors by the "midmean" statistic (the interquartile mean):
#: it ignores up to a quarter of outlying curves, like the median ignores up to half
MIDMEAN_CUT = 0.25


def _midmean(a, axis=None):
    return stats.trim_mean(a, MIDMEAN_CUT, axis=axis)


#: the statistics a held-out score may take of its per-curve errors: "median" (robust to up to half of the curves
#: outlying), "mean" (clean held-out curves), "midmean" (the mean of the middle half). Compared on the same curves,
#: the median moves only with the curves that cross it, so a fall of its score is far noisier than the fall of a
#: mean over many curves: between two candidates the curves tell apart by a small fraction of their noise, the
#: median may rank them either way while the midmean, a mean of half of the curves, keeps most of the mean's
#: precision with outlying curves left out
STATISTICS = {"median": np.median, "mean": np.mean, "midmean": _midmean}


def score_statistic(statistic: str):
    """The reduction ``f(errors, axis=None)`` of per-curve errors that :data:`STATISTICS` names ``statistic``."""
    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(STATISTICS)}, got {statistic!r}")
    return STATISTICS[statistic]


def held_out_statistic(loss) -> str:
    """The statistic (a key of :data:`STATISTICS`) of the per-curve held-out squared errors by which the library's
    selections score a candidate fitted with ``loss``: the held-out walk of the random-feature path, and the K-fold
    cross-validation of :class:`~rffor.FunctionalRegressorCV` and of :class:`~rffor.OutputKernelRegressorCV` when it
    scores in the output kernel's feature space (its ``scoring="decoded"`` and the quantile CV's pinball score are
    means of their own losses). The mean for the square loss (the held-out estimate of its own risk), the midmean for
    a robust loss: outlying held-out curves, like the training set's, must not decide (it leaves out the quarter of
    the curves with the largest errors, and the quarter with the smallest), and of the robust statistics it keeps the
    most of a mean's precision: the median's fall between two candidates scatters several times as much, and ranked
    candidates whose test errors differ by a third the wrong way round (benchmarks/README.md, the learning curve's
    study of the held-out statistic: 22 fits, two robust losses, seeds 1 and 2, never the reported seed).
    ``loss`` is asked for ``is_square`` only."""
    return "mean" if loss.is_square else "midmean"


def improves(new: float, old: float, plateau: float = PLATEAU) -> bool:
    """Whether a score ``new`` improves on ``old`` by at least the fraction ``plateau`` (lower is better)."""
    return new <= old * (1.0 - plateau)


def paired_gain(
    new: np.ndarray, old: np.ndarray, statistic: str, *, n_boot: int = BOOTSTRAP_SAMPLES, seed: int = 0
) -> tuple[float, float]:
    """How much a score falls from one candidate to another on the same held-out curves, and the standard error of
    that fall.

    The score of a candidate is the ``statistic`` (:data:`STATISTICS`) of its per-curve errors; the fall is
    ``score(old) − score(new)``, and its standard error is the standard deviation of the same difference over
    ``n_boot`` resamples of the curves with replacement, the same resampled curves for both candidates (paired):
    what the two candidates share, above all the noise of the held-out curves themselves, cancels in it. The
    resamples are drawn by a Generator seeded with ``seed`` (deterministic).

    Parameters
    ----------
    new, old : ndarray of shape (n_curves,)
        Per-curve errors of the two candidates on the same curves, in the same order.
    statistic : {"median", "mean", "midmean"}
        No default on purpose: the library's statistic depends on the loss (:func:`held_out_statistic`).
    n_boot : int
    seed : int

    Returns
    -------
    gain : float
        ``score(old) − score(new)`` (> 0: ``new`` is better).
    se : float
        Its bootstrap standard error (0 for fewer than 2 curves or ``n_boot`` = 0).
    """
    new, old = np.asarray(new, dtype=np.float64), np.asarray(old, dtype=np.float64)
    if new.shape != old.shape or new.ndim != 1:
        raise ValueError(f"new and old must be 1-D per-curve errors of one shape, got {new.shape} and {old.shape}")
    reduce = score_statistic(statistic)
    gain = float(reduce(old) - reduce(new))
    if new.size < 2 or n_boot == 0:
        return gain, 0.0
    idx = np.random.default_rng(seed).integers(0, new.size, size=(int(n_boot), new.size))
    gains = reduce(old[idx], axis=1) - reduce(new[idx], axis=1)
    return gain, float(np.std(gains, ddof=1))


def significantly_better(
    new: np.ndarray,
    old: np.ndarray,
    statistic: str,
    *,
    significance: float = SIGNIFICANCE,
    plateau: float = 0.0,
) -> bool:
    """Whether candidate ``new`` beats ``old`` on the same held-out curves: its score is lower by more than
    ``significance`` standard errors of the fall (:func:`paired_gain`), by at least the fraction ``plateau`` of
    ``old``'s score (:func:`improves`), and by more than :data:`MIN_FALL` of it (a smaller fall is rounding).

    Why not a fixed fraction alone: on noisy curves the held-out score is the noise of the curves plus the
    model's error, and the noise, which no model removes, can be most of it; a step that lowers the model's error by
    a third may then lower the score by less than 1% (measured on the curves of benchmarks/learning_curve.py with
    noise of 1% of the signal's energy: a step 0.6% lower on the held-out median was 24% lower in clean test
    error). The standard error of a paired difference does not contain that noise, only how unevenly the step
    helps the curves. The default threshold (:data:`SIGNIFICANCE`) is 0: any fall; a positive threshold stopped
    the walk before the models closest to the clean test curves in the design study that set it.
    """
    gain, se = paired_gain(new, old, statistic, n_boot=BOOTSTRAP_SAMPLES if significance > 0 else 0)
    old_score = float(score_statistic(statistic)(np.asarray(old, dtype=np.float64)))
    return (
        gain > significance * se and improves(old_score - gain, old_score, plateau) and gain > MIN_FALL * abs(old_score)
    )


@dataclass(frozen=True)
class Axis:
    """The values one hyperparameter may take.

    Parameters
    ----------
    values : sequence of numbers
        The starting grid (any order).
    step : float or None, default 10
        Factor between successive values past the grid's ends. None: the ratio of the grid's two end values on
        each side (10 for a one-value grid).
    low, high : float or None
        Natural limits (inclusive): nothing past them is tried; a step that would cross one lands on the limit.
    integer : bool, default False
        Integer values (numbers of components, leaves): past the ends, values are rounded outwards and at least 1
        apart.
    """

    values: tuple
    step: float | None = 10.0
    low: float | None = None
    high: float | None = None
    integer: bool = False

    def start(self) -> list:
        """The starting grid, sorted, limits applied."""
        vals = {self._cast(v) for v in self.values}
        return sorted(v for v in vals if (self.low is None or v >= self.low) and (self.high is None or v <= self.high))

    def _ratio(self, g: list, side: int) -> float:
        if self.step is not None:
            return float(self.step)
        if len(g) < 2:
            return 10.0
        return g[1] / g[0] if side < 0 else g[-1] / g[-2]

    def neighbour(self, v, direction: int):
        """The value next to ``v`` below (``direction`` -1) or above (+1), or None past a natural limit.

        Inside the starting grid's range: the next grid value. Past its ends: the end value times the k-th power of
        the step (rounded to 12 significant digits, so that a step away and back returns the same float: the key of
        a candidate already scored), or for integer axes ``v`` times the step rounded outwards, at least 1 away. A
        value past a natural limit becomes the limit itself; a zero or negative value has no neighbour by ratio.
        """
        g = self.start()
        if not g or g[0] <= 0 or v <= 0:
            return None
        if self.integer and (v > g[-1] or v < g[0] or (v == g[-1] and direction > 0) or (v == g[0] and direction < 0)):
            w = (
                max(math.ceil(v * self._ratio(g, +1)), v + 1)
                if direction > 0
                else min(math.floor(v / self._ratio(g, -1)), v - 1)
            )
            return self._limited(v, w, direction)
        lo, hi = self._ratio(g, -1), self._ratio(g, +1)
        above_top = float(np.log(v / g[-1]) / np.log(hi))  # > 0: steps of hi past the top end
        below_bottom = float(np.log(g[0] / v) / np.log(lo))  # > 0: steps of lo past the bottom end
        if above_top > 1e-9 or (above_top > -1e-9 and direction > 0):
            k = round(above_top) + direction
            w = float(f"{g[-1] * hi**k:.12g}") if k > 0 else g[-1]
        elif below_bottom > 1e-9 or (below_bottom > -1e-9 and direction < 0):
            k = round(below_bottom) - direction
            w = float(f"{g[0] / lo**k:.12g}") if k > 0 else g[0]
        elif direction < 0:
            w = [x for x in g if x < v * (1 - 1e-9)][-1]
        else:
            w = next(x for x in g if x > v * (1 + 1e-9))
        return self._limited(v, self._cast(w), direction)

    def _limited(self, v, w, direction: int):
        """``w`` clamped to the natural limit on its side (a value within rounding of a limit is the limit), or None
        when ``v`` is already there."""
        if direction < 0 and self.low is not None and w <= self.low * (1 + 1e-9):
            return self._cast(self.low) if v > self.low * (1 + 1e-9) else None
        if direction > 0 and self.high is not None and w >= self.high * (1 - 1e-9):
            return self._cast(self.high) if v < self.high * (1 - 1e-9) else None
        return w if w > 0 else None

    def widen(self, grid: Sequence, side: str) -> list:
        """The value one extension adds past the ``side`` ("low" or "high") end of ``grid`` (empty at a limit)."""
        v = grid[0] if side == "low" else grid[-1]
        w = self.neighbour(v, -1 if side == "low" else +1)
        return [] if w is None or w in grid else [w]

    def _cast(self, v):
        return int(round(v)) if self.integer else float(v)


# ---------------------------------------------------------------------------------------------------------------
# the walk: candidates scored one at a time
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Walk:
    """Where a :func:`walk` ended.

    Attributes
    ----------
    best : float
        The value reached.
    score : float
        Its score.
    status : str
        Module docstring: "interior", "flat low"/"flat high", "low limit"/"high limit".
    trail : list of str
        The steps tried, ``"value: score"``, and ``"down: a limit"`` where a limit stopped the walk.
    scores : dict
        Every value the walk scored and its score.
    """

    best: float
    score: float
    status: str
    trail: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)

    @property
    def at_limit(self) -> bool:
        return self.status.endswith("limit")


def walk(
    axis: Axis,
    start: float,
    score: Callable[[float, float | None], float],
    *,
    first: int = -1,
    plateau: float = PLATEAU,
    better: Callable[[float, float], bool] | None = None,
) -> Walk:
    """Walk along ``axis`` from ``start``: step to the neighbouring value (:meth:`Axis.neighbour`) while the step
    is better (``better``; default: it :func:`improves` the score by ``plateau``); if the first step in direction
    ``first`` (-1: down, +1: up) is not, go the other way. Between values neither of which is better than the other
    the walk keeps the one it reached first. It ends with both neighbours of its value scored and neither better, or
    at a natural limit.

    Parameters
    ----------
    axis : Axis
    start : float
    score : callable ``(value, came_from) -> float``
        The score of a value (lower is better); ``came_from`` is the value the walk steps from (None for the start):
        a caller that fits candidates warm-starts there. The caller memoises if a value can be asked twice.
    first : {-1, +1}
    plateau : float
    better : callable ``(new value, old value) -> bool``, optional
        Whether a scored value beats another (e.g. :func:`significantly_better` on their per-curve errors); default
        ``improves(score(new), score(old), plateau)``.

    Returns
    -------
    Walk
    """
    seen = {start: score(start, None)}
    if better is None:

        def better(new, old):
            return improves(seen[new], seen[old], plateau)

    best, best_score = start, seen[start]
    trail = []
    for direction in (first, -first):
        v = start
        while True:
            w = axis.neighbour(v, direction)
            if w is None:
                trail.append(f"{'down' if direction < 0 else 'up'}: a limit")
                break
            s = seen[w] = score(w, v)
            trail.append(f"{w:.3g}: {s:.4g}")
            if not better(w, best):
                break
            best, best_score, v = w, s, w
        if best != start:
            break
    return Walk(best, best_score, _status(axis, best, best_score, seen), trail, seen)


def _status(axis: Axis, best, best_score: float, seen: dict) -> str:
    """The status of a selected value from the scores of its neighbours."""
    lo, hi = axis.neighbour(best, -1), axis.neighbour(best, +1)
    if lo is None:
        return "low limit"
    if hi is None:
        return "high limit"
    if lo in seen and seen[lo] < best_score:
        return "flat low"
    if hi in seen and seen[hi] < best_score:
        return "flat high"
    return "interior"


# ---------------------------------------------------------------------------------------------------------------
# the widening product: candidates scored in batches
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Selection:
    """What :func:`select_widening` found.

    Attributes
    ----------
    best : dict
        ``{rule: selected parameters}``.
    edges : dict
        ``{rule: {axis: status}}`` (module docstring).
    grids : dict
        ``{axis: every value tried, sorted}`` (the starting grid and its extensions).
    widened : list of str
        The extensions in order, e.g. ``"lam low: 1e-10"``.
    scores : dict
        ``{rule: {candidate key: aggregated score}}``, key = tuple of the axis values in axis order.
    fold_scores : dict
        ``{rule: {candidate key: fold scores}}``.
    """

    best: dict
    edges: dict
    grids: dict
    widened: list = field(default_factory=list)
    scores: dict = field(default_factory=dict)
    fold_scores: dict = field(default_factory=dict)

    def candidates(self) -> list[dict]:
        """Every candidate scored, as parameter dicts."""
        names = list(self.grids)
        first = next(iter(self.scores.values()))
        return [dict(zip(names, key, strict=True)) for key in first]


def select_widening(
    evaluate: Callable[[list[dict]], list[dict]],
    axes: dict[str, Axis],
    *,
    reduce: dict[str, Callable[[np.ndarray], float]],
    max_widen: int = 6,
    flat: float = PLATEAU,
    on_edge: str = "raise",
) -> Selection:
    """Select on the product of ``axes``, extending an axis past any edge a selection lands on (module docstring).

    ``evaluate(candidates)`` receives the candidates not scored yet (parameter dicts: a whole grid or an extension's
    new values at once, so that a caller can share work between them, e.g. a warm-started λ path) and returns, for
    each, ``{rule: fold scores}`` (lower is better); ``reduce[rule]`` turns a candidate's fold scores into its score
    (a fold that failed should score +inf). Each rule selects the candidate of lowest score (the first in sorted
    order on ties). While a rule's selection sits at the low or high end of an axis, that axis gets one more value
    past that end (:meth:`Axis.widen`, combined with every value of the other axes), and the selection is made
    again. A side stops extending at the axis' natural limit ("low limit" / "high limit"), or when one extension
    improved the rule's best score by less than ``flat`` ("flat low" / "flat high"); after ``max_widen`` extensions
    of one side it fails (``on_edge="raise"``: RuntimeError) or stops there ("keep": status "low edge" / "high
    edge").

    Returns
    -------
    Selection
    """
    rules = list(reduce)
    names = list(axes)
    grids = {a: axes[a].start() for a in names}
    agg: dict = {r: {} for r in rules}
    fold: dict = {r: {} for r in rules}
    flat_sides: dict = {r: set() for r in rules}
    gave_up: set = set()
    pending: dict = {}  # (rule, axis, side) -> the rule's best score before that side was widened
    n_widen: Counter = Counter()
    widened: list[str] = []
    while True:
        current = list(itertools.product(*(grids[a] for a in names)))
        new = [key for key in current if key not in agg[rules[0]]]
        if new:
            scored = evaluate([dict(zip(names, key, strict=True)) for key in new])
            for key, fs in zip(new, scored, strict=True):
                for r in rules:
                    fold[r][key] = np.asarray(fs[r], dtype=float)
                    agg[r][key] = float(reduce[r](fold[r][key]))
        best, edges, todo = {}, {}, set()
        for r in rules:
            scores = np.array([agg[r][k] for k in current])
            i = int(np.argmin(scores))
            if not np.isfinite(scores[i]):
                raise RuntimeError(f"rule {r!r}: every candidate failed to fit on some fold ({_grids_text(grids)})")
            best[r] = current[i]
            for (rule, a, side), before in list(pending.items()):
                if rule == r:
                    if not improves(scores[i], before, flat) or scores[i] == before:
                        flat_sides[r].add((a, side))
                    del pending[(rule, a, side)]
            edges[r] = {}
            for j, a in enumerate(names):
                g, v = grids[a], best[r][j]
                edges[r][a] = "interior"
                for side, end in (("low", g[0]), ("high", g[-1])):
                    if v != end:
                        continue
                    if not axes[a].widen(g, side):
                        edges[r][a] = f"{side} limit"
                    elif (a, side) in flat_sides[r]:
                        edges[r][a] = f"flat {side}"
                    elif (a, side) in gave_up:
                        edges[r][a] = f"{side} edge"
                    else:
                        todo.add((a, side))
                        pending[(r, a, side)] = scores[i]
        todo = {t for t in todo if t not in gave_up}
        for a, side in sorted(todo):
            if n_widen[(a, side)] >= max_widen:
                if on_edge == "raise":
                    raise RuntimeError(
                        f"the selection stays at the {side} edge of {a} after {max_widen} widenings and the score "
                        f"still improves by more than {flat:.0%} per step ({_grids_text(grids)}): widen the starting "
                        "grid or raise max_widen"
                    )
                gave_up.add((a, side))
        todo -= gave_up
        if not todo:
            if gave_up:  # statuses of the sides given up
                for r in rules:
                    for j, a in enumerate(names):
                        g, v = grids[a], best[r][j]
                        for side, end in (("low", g[0]), ("high", g[-1])):
                            if v == end and (a, side) in gave_up:
                                edges[r][a] = f"{side} edge"
            break
        for a, side in sorted(todo):
            n_widen[(a, side)] += 1
            new_values = axes[a].widen(grids[a], side)
            grids[a] = sorted(set(grids[a]) | set(new_values))
            widened.append(f"{a} {side}: " + ", ".join(f"{v:.3g}" for v in new_values))
    return Selection(
        best={r: dict(zip(names, best[r], strict=True)) for r in rules},
        edges=edges,
        grids=grids,
        widened=widened,
        scores=agg,
        fold_scores=fold,
    )


def _grids_text(grids: dict) -> str:
    return "; ".join(f"{a} {{{', '.join(f'{v:.3g}' for v in g)}}}" for a, g in grids.items())
