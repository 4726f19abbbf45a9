"""Automatic hyperparameters of the random-feature fit: λ (``lam="auto"``), the loss's own κ or ε
(``loss_params="auto"``) and the output kernel's γ (``kernel_theta_params="auto"``), chosen on held-out rows, every
candidate fitted where the data is.

The route, inside :func:`rffor.solvers.rff.fit_rff`'s executor session (every pass a task per partition where the
data is; the driver only combines small matrices):

1. rows are split by :class:`rffor.chunked.RowSplit`: about one in ``holdout`` held out, spread over every chunk;
2. one pass: the closed-form sums (:class:`~rffor.solvers.sums.FeatureSums`) of the training rows and of the
   held-out rows (:func:`~rffor.solvers.sums.split_sums_task`), of the raw outputs (``Φ_Xᵀ Y``, D_x × m), so that
   the sums of any output feature map are one product on the driver (:meth:`~rffor.solvers.sums.FeatureSums.project`);
3. the training rows' sums are a TSQR factor ``[R | Z]`` of ``[Φ_X | Y]``; one SVD of R (the eigenbasis of the
   feature covariance C_X = RᵀR/n, :meth:`~rffor.solvers.mm.SquareMetric.from_sums`) gives the square-loss
   closed form of (P_rf) at any λ, and with any output kernel k_Θ, for one solve (MATH.md §5:
   ``C_X B C_Θ + λ B = M``);
4. the λ grid's closed forms are scored together in one pass over the held-out rows (each held-out curve's MSE
   under every model, :func:`~rffor.solvers.mm.curve_errors_task`), by their **midmean** for a robust loss (the
   mean of the middle half, :func:`rffor.edge_rule.held_out_statistic`: like paper 000 §5.1's median, a minority
   of outlying validation curves does not move it, and it ranks close candidates with most of a mean's precision)
   or their mean for the square loss;
5. a **walk** along one hyperparameter from the best of them (:func:`select_hyperparameters`): step to the
   neighbouring value of the grid (past its ends, further values at the grid's end ratio: a grid edge never wins
   silently) and keep going while a step lowers the held-out score by more than ``significance`` standard errors
   of that fall, paired over the held-out curves (:func:`rffor.edge_rule.significantly_better`: a bootstrap of
   the curves, the same resampled curves for both candidates, so that the noise of the curves, which no model
   removes, cancels); the default, :data:`rffor.edge_rule.SIGNIFICANCE` = 0, takes any fall (the threshold that
   came closest to the clean-test oracle in the design study of benchmarks/learning_curve.py ``--rules``). If the
   first step in one direction does not, try the other. The selected value has then been compared with both of
   its neighbours (status "interior" or "flat", ``Selection.statuses``), or the walk reached a hard bound
   (``Selection.at_bound``). Between values the held-out curves cannot tell apart the walk keeps the one it
   reached first: the more regularised (larger λ) from the start value. (A fixed fraction of the score, 1%
   before, stops too early on noisy curves, whose score is mostly their own noise.)
6. robust losses: each candidate is fitted by accelerated majorize–minimize passes
   (:func:`~rffor.solvers.mm.mm_minimize`) warm-started at its neighbour's model, which costs a few passes where a
   start from the closed form costs tens;
7. the loss's κ or ε and the output kernel's γ_Θ are walked the same way at the selected λ, then λ again
   (coordinate search, until no walk moves). A candidate with another γ_Θ has its own output factor (its Φ_Θ
   shared with the tasks once per γ_Θ; the input features the workers cached are reused) and starts from its
   neighbour's model re-expressed in that factor (:meth:`~rffor.outputs.OutputMap.coef_from`); its walk tries
   the larger γ_Θ first, whose factor keeps what the smaller one's holds, so that step costs a few passes. γ_Θ sets the
   smoothness along Θ: the given k_Θ may be smoother than the curves (every model is then held above the error of
   projecting the curves on its factor) or rougher than they need.

:func:`fit_rff` then fits the selected (λ, κ, γ_Θ) on all rows from the selected candidate's model: the square
loss's closed form from the two factors merged (no further pass; one more pass of sums over all rows when the
selection read a subsample of chunks), other losses by MM passes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import numpy as np

from ..edge_rule import SIGNIFICANCE, Axis, held_out_statistic, score_statistic, significantly_better, walk
from ..executor import chunkwise
from .maps import share_output_side
from .mm import SquareMetric, concat_errors, curve_errors_task, grad_task, mm_minimize
from .problem import RFProblem
from .sums import SplitSums, split_sums_task, square_objective_from_sums

__all__ = ["Candidate", "Selection", "select_hyperparameters", "param_axis"]

#: hard bounds of the λ walk: above 1e2 every model is ~0 (‖φ‖ ≤ 1), below 1e-30 λ is below float64 rounding of
#: every term of the normal equations
LAM_BOUNDS = (1e-30, 1e2)

#: step of the walk along a loss parameter or k_Θ's γ when its grid has one value (half a decade: the held-out error
#: of the Huber losses varies about like κ² on corrupted curves, so decades are too coarse; for a Gaussian k_Θ it is a
#: factor 1.78 of its length scale, √10 for a Laplacian one)
PARAM_RATIO = 10.0**0.5

#: how far a walk of a loss parameter or of γ_Θ may go from its start (a factor either way): a hard bound
PARAM_RANGE = 1e12


@chunkwise
def _train_grad_task(part, p, chunk_ids, split, maps, B, loss):
    """:func:`~rffor.solvers.mm.grad_task` on the training side of the split of the partition's rows."""
    return grad_task(split.view(part), p, chunk_ids, maps, B, loss)


@chunkwise
def _held_errors_task(part, p, chunk_ids, split, maps, Bs):
    """:func:`~rffor.solvers.mm.curve_errors_task` on the held-out side of the split of the partition's rows."""
    return curve_errors_task(split.view(part), p, chunk_ids, maps, Bs)


@dataclass
class Candidate:
    """One fitted candidate of the search.

    Attributes
    ----------
    lam : float
    param : float or None
        The loss's κ or ε (None: the loss has none, or it was not searched).
    gamma : float
        γ of the candidate's output kernel k_Θ.
    score : float
        Held-out score (the statistic of :func:`rffor.edge_rule.held_out_statistic` over the held-out curves'
        MSE, the midmean or the mean; lower is better).
    objective : float
        Training objective J (MATH.md (P_rf) on the training rows).
    passes : int
        Gradient passes its fit took (0 for a closed form).
    coef : ndarray of shape (D_x, D_θ), float64
        The model, fitted on the training rows, in the output factor of its k_Θ.
    sums : GradSums or None
        The gradient sums at ``coef`` (robust losses): a neighbour with the same loss and k_Θ starts from them.
    errors : ndarray of shape (held-out rows,) or None
        The MSE of every held-out curve under the candidate (in the order of the chunks): the walk compares two
        candidates on them, paired (:func:`rffor.edge_rule.significantly_better`).
    """

    lam: float
    param: float | None
    gamma: float
    score: float
    objective: float
    passes: int
    coef: np.ndarray = field(repr=False)
    sums: object = field(default=None, repr=False)
    errors: np.ndarray | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple:
        return (self.lam, self.param, self.gamma)


@dataclass
class _Output:
    """One output kernel of a search: its :class:`~rffor.outputs.OutputMap`, the fit's maps with its Φ_Θ as
    shared with the session, its square-loss metric (C_X's eigendecomposition shared) and its closed-form sums."""

    out: object
    maps: object
    metric: SquareMetric
    train: object  # FeatureSums of the training rows in this output factor

    def closed_form(self, m: int, lam: float) -> np.ndarray:
        return self.metric.closed_form(self.train, m, lam)


@dataclass
class Selection:
    """What the search of :func:`select_hyperparameters` evaluated and chose.

    Attributes
    ----------
    candidates : list of Candidate
        In the order they were evaluated.
    best : int
        Index of the selected candidate.
    score_name : str
        The statistic over held-out curves (:data:`rffor.edge_rule.STATISTICS`).
    param_name : str or None
        "kappa", "epsilon", or None when only λ was searched.
    log : list of str
        The walks made (values and scores).
    closed_forms : dict
        The square-loss closed forms of the starting grid: ``{"lams": [...], "scores": [...]}`` (held-out scores
        under ``score_name``): for a robust loss, what the MM passes improved on.
    at_bound : bool
        Whether a walk stopped at a hard bound (:data:`LAM_BOUNDS`, or a parameter bound) while still improving.
    n_train, n_held : int
        Rows on each side.
    sums : SplitSums
        Of the raw outputs (``xy`` of shape (D_x, m)): :meth:`~rffor.solvers.sums.FeatureSums.project` by
        ``output.Phi_theta`` gives the selected model's.
    output : OutputMap
        The selected candidate's output side (its k_Θ).
    maps : handle
        The fit's maps with ``output.Phi_theta``, as shared with the session.
    gamma_searched : bool
        Whether k_Θ's γ was searched.
    statuses : dict
        The edge rule's status of each walked hyperparameter at its last walk (:mod:`rffor.edge_rule`).
    """

    candidates: list[Candidate]
    best: int
    score_name: str
    param_name: str | None
    log: list[str]
    closed_forms: dict
    at_bound: bool
    n_train: int
    n_held: int
    sums: SplitSums = field(repr=False)
    output: object = field(default=None, repr=False)
    maps: object = field(default=None, repr=False)
    gamma_searched: bool = False
    statuses: dict = field(default_factory=dict)

    @property
    def lam(self) -> float:
        return self.candidates[self.best].lam

    @property
    def param(self) -> float | None:
        return self.candidates[self.best].param

    @property
    def gamma(self) -> float:
        """γ of the selected k_Θ."""
        return self.candidates[self.best].gamma

    @property
    def coef(self) -> np.ndarray:
        return self.candidates[self.best].coef

    @property
    def passes(self) -> int:
        """Gradient passes over the training rows, all candidates together."""
        return int(sum(c.passes for c in self.candidates))

    def to_dict(self) -> dict:
        """JSON-ready summary (no coefficients): one entry per candidate in ``lams``, ``params``, ``gammas_theta``,
        ``scores``, ``objectives``, ``candidate_passes``."""
        return {
            "lams": [c.lam for c in self.candidates],
            "params": [c.param for c in self.candidates],
            "gammas_theta": [c.gamma for c in self.candidates],
            "scores": [c.score for c in self.candidates],
            "objectives": [c.objective for c in self.candidates],
            "candidate_passes": [c.passes for c in self.candidates],
            "lam": self.lam,
            "param": self.param,
            "param_name": self.param_name,
            "gamma_theta": self.gamma,
            "gamma_theta_searched": bool(self.gamma_searched),
            "score": self.score_name,
            "passes": self.passes,
            "log": list(self.log),
            "closed_forms": self.closed_forms,
            "at_bound": bool(self.at_bound),
            "statuses": dict(self.statuses),
            "n_train": self.n_train,
            "n_held": self.n_held,
        }


def param_axis(grid, start: float) -> Axis:
    """The axis of a loss parameter or of k_Θ's bandwidth walked from ``start``: ``grid``'s values, half decades
    (:data:`PARAM_RATIO`) past a one-value grid's ends, within :data:`PARAM_RANGE` of the start."""
    grid = [float(v) for v in grid]
    limits = (start / PARAM_RANGE, start * PARAM_RANGE) if start > 0 else (None, None)
    return Axis(tuple(grid), step=PARAM_RATIO if len(set(grid)) == 1 else None, low=limits[0], high=limits[1])


def select_hyperparameters(
    run,
    problem: RFProblem,
    *,
    lams,
    params=None,
    gammas=None,
    significance: float = SIGNIFICANCE,
    plateau: float = 0.0,
    statistic: str | None = None,
    max_rounds: int = 3,
    chunks=None,
    say=None,
) -> Selection:
    """Choose λ (and the loss's κ or ε when ``params`` is given, and k_Θ's γ when ``gammas`` is given) on the
    held-out rows of ``problem.split`` (module docstring).

    Parameters
    ----------
    run : executor session
    problem : RFProblem
        The fit's problem: its maps (as shared with the session), output side (k_Θ as given), loss (with
        ``params``, its :attr:`~rffor.losses.Loss.param_name` is searched too, starting at the loss's own value),
        row split, and the MM stopping rule and pass budget of every candidate's fit (``settings.tol``,
        ``settings.max_passes``).
    lams : sequence of float
        The starting λ grid (scored in closed form; the walk continues past its ends).
    params : sequence of float, optional
        The loss parameter's grid (a single value: the walk steps by :data:`PARAM_RATIO`).
    gammas : sequence of float, optional
        The grid of k_Θ's bandwidth, walked from the problem's k_Θ (a single value: by :data:`PARAM_RATIO`); every
        value gets its own output side (:func:`rffor.solvers.maps.share_output_side`).
    significance : float, default :data:`rffor.edge_rule.SIGNIFICANCE` (0)
        A step of a walk is taken only if it lowers the held-out score by more than this many standard errors of
        the fall, paired over the held-out curves (:func:`rffor.edge_rule.significantly_better`; 0: any fall).
    plateau : float, default 0
        ... and by at least this fraction of the score (:func:`rffor.edge_rule.improves`; 0: any fall the curves
        show).
    statistic : {"median", "mean", "midmean"}, optional
        The held-out score's statistic of the per-curve errors (:data:`rffor.edge_rule.STATISTICS`); default the
        library's for ``problem.loss`` (:func:`rffor.edge_rule.held_out_statistic`: the midmean for a robust loss,
        the mean for the square loss).
    max_rounds : int, default 3
        Coordinate-search rounds (a walk of every searched hyperparameter) after the first λ walk, at most.
    chunks : sequence of int, optional
        Select on these chunks' rows only (both sides of the split); default all.
    say : callable, optional
        Progress messages.

    Returns
    -------
    Selection
    """
    say = say or (lambda _: None)
    if statistic is not None:
        score_statistic(statistic)  # a bad name fails here, before any pass
    split, output, maps, loss, m = problem.split, problem.output, problem.maps, problem.loss, problem.m
    tic = time.perf_counter()
    sums = run.reduce(
        split_sums_task, maps, split, chunks=chunks, label="closed form sums (training and held-out rows)"
    )
    tr = sums.train
    if tr.n == 0 or sums.held.n == 0:
        raise ValueError(
            f"lam='auto' needs training and held-out rows; the split of {tr.n + sums.held.n} rows gave "
            f"{tr.n} and {sums.held.n}"
        )
    metric = SquareMetric.from_sums(tr, output.C_theta, float(np.max(lams)))
    robust = not loss.is_square
    score_name = statistic or held_out_statistic(loss)
    say(
        f"selection: sums of {tr.n} training and {sums.held.n} held-out curves computed by the partition tasks, "
        f"one SVD of the training rows' R factor on the driver ({time.perf_counter() - tic:.1f} s); held-out score: "
        f"the {score_name} over held-out curves of their MSE"
    )
    param_name = loss.param_name if params is not None else None
    p0 = None if param_name is None else float(getattr(loss, param_name))
    kernel = output.kernel
    # a k_Θ without a bandwidth (the identity of an explicit embedding) keys its candidates by 1
    g0 = float(getattr(kernel, kernel.param_name)) if kernel.param_name else 1.0
    search = _Search(run, problem, metric, tr, score_name, say)
    search.param_name, search.chunks = param_name, chunks
    search.significance, search.plateau = float(significance), float(plateau)
    search.add_output(g0, output, maps)

    # every λ of the starting grid in closed form (the given k_Θ), scored in one pass over the held-out rows
    base = search.outputs[g0]
    grid = sorted({float(v) for v in lams}, reverse=True)
    closed = np.stack([base.closed_form(m, lam) for lam in grid])
    errors = search.errors(closed, base)
    scores = search.reduce(errors)
    say("selection: square-loss closed forms, held-out " + score_name + " curve MSE "
        + ", ".join(f"{lam:.0e}: {s:.4g}" for lam, s in zip(grid, scores, strict=True)))  # fmt: skip
    if not robust:
        for lam, B, s, e in zip(grid, closed, scores, errors, strict=True):
            search.add((lam, None, g0), s, B, 0, errors=e)
    lam = grid[int(np.argmin(scores))]
    floor = None if param_name is None else loss.param_floor(math.sqrt(max(float(np.min(scores)), 0.0)))
    if floor is not None and p0 < floor:  # a redescending loss: nothing below the residuals' scale (Loss.param_floor)
        say(f"selection: {param_name} starts at {floor:.3g}, the held-out curves' residual norm under the square "
            f"loss (the loss's floor), not at {p0:.3g}")  # fmt: skip
        p0 = floor
    if robust:  # the robust fit at the start λ, from its closed form
        search.evaluate((lam, p0, g0), warm=closed[grid.index(lam)])

    # coordinate search: λ, then every other searched hyperparameter and λ again, until no walk moves
    cur = {"lam": lam, "param": p0, "gamma": g0}
    # (label, axis, direction of the first step): λ and κ/ε try the smaller value first; γ_Θ the larger one, whose
    # output factor spans about what the smaller one's does, so the neighbour's model carries over and the step
    # costs a few passes (a smaller γ_Θ drops directions of the model: tens of passes to re-converge)
    axes = {"lam": ("λ", Axis(tuple(grid), step=None, low=LAM_BOUNDS[0], high=LAM_BOUNDS[1]), -1)}
    if param_name is not None:
        axis = param_axis(params if floor is None else [v for v in params if v >= floor] or [p0], p0)
        if floor is not None:
            axis = replace(axis, low=max(floor, axis.low or 0.0))
        axes["param"] = (param_name, axis, -1)
    if gammas is not None:
        axes["gamma"] = ("γ_Θ", param_axis(gammas, g0), +1)

    def along(name):
        def point(v):
            pt = {**cur, name: float(v)}
            return (pt["lam"], pt["param"], pt["gamma"])

        return point

    cur["lam"] = search.walk(*axes["lam"], cur["lam"], along("lam"))
    cycle = [k for k in axes if k != "lam"] + ["lam"]
    unmoved, walks = 1, 0
    while unmoved < len(cycle) and walks < max_rounds * len(cycle):
        name = cycle[walks % len(cycle)]
        new = search.walk(*axes[name], cur[name], along(name))
        unmoved = unmoved + 1 if new == cur[name] else 1
        cur[name] = new
        walks += 1
    best = search.index[(cur["lam"], cur["param"], cur["gamma"])]
    c = search.candidates[best]
    chosen = search.outputs[c.gamma]
    for g, o in search.outputs.items():  # the other output sides' maps are no longer needed on the cluster
        if g != c.gamma and o.maps is not maps:
            run.release(o.maps)
    say(
        f"selection: λ = {c.lam:.0e}" + (f", {param_name} = {c.param:.3g}" if param_name else "")
        + (f", k_Θ = {chosen.out.kernel!r}" if gammas is not None else "")
        + f" (held-out {score_name} curve MSE {c.score:.4g}); {len(search.candidates)} candidates, "
        f"{sum(x.passes for x in search.candidates)} gradient passes ({time.perf_counter() - tic:.1f} s)"
    )  # fmt: skip
    return Selection(
        candidates=search.candidates,
        best=best,
        score_name=score_name,
        param_name=param_name,
        log=search.log,
        closed_forms={"lams": list(grid), "scores": [float(v) for v in scores]},
        at_bound=any(search.bounded.values()),
        n_train=int(tr.n),
        n_held=int(sums.held.n),
        sums=sums,
        output=chosen.out,
        maps=chosen.maps,
        gamma_searched=gammas is not None,
        statuses=dict(search.statuses),
    )


class _Search:
    """The candidates of one selection: fitted on the training rows, scored on the held-out rows, memoised by
    ``(λ, param, γ_Θ)``."""

    def __init__(self, run, problem: RFProblem, metric, tr, score_name: str, say):
        self.run, self.problem, self.metric, self.tr, self.m = run, problem, metric, tr, problem.m
        self.loss, self.param_name = problem.loss, None
        self.train, self.held = problem.split.side(False), problem.split.side(True)
        self.score_name, self.say = score_name, say
        self.tol, self.max_passes = problem.settings.tol, problem.settings.max_passes
        self.significance, self.plateau, self.chunks = SIGNIFICANCE, 0.0, None
        self.bounded: dict[str, bool] = {}
        self.statuses: dict[str, str] = {}
        self.candidates: list[Candidate] = []
        self.index: dict[tuple, int] = {}
        self.log: list[str] = []
        self.outputs: dict[float, _Output] = {}

    def add_output(self, gamma: float, out, maps) -> _Output:
        o = _Output(out, maps, self.metric.with_output(out.C_theta), self.tr.project(out.Phi_theta))
        self.outputs[float(gamma)] = o
        return o

    def output(self, gamma: float) -> _Output:
        """The output side of k_Θ with this bandwidth (built and shared with the session on first use)."""
        if gamma not in self.outputs:
            tic = time.perf_counter()
            out, maps = share_output_side(self.run, self.problem, self.problem.output.kernel.with_param(gamma))
            self.add_output(gamma, out, maps)
            self.say(
                f"selection: k_Θ = {out.kernel!r}: output factor of rank {out.n_features} on the grid, shared with "
                f"the partition tasks ({time.perf_counter() - tic:.1f} s)"
            )
        return self.outputs[gamma]

    def errors(self, Bs: np.ndarray, o: _Output) -> np.ndarray:
        """Per-curve held-out MSE of K models of one output side (one pass over the held-out rows), shape
        (K, held rows)."""
        handle = self.run.share(np.ascontiguousarray(Bs))
        try:
            E = self.run.reduce(  # (K, held rows): every held-out row's errors, in row order
                _held_errors_task, self.held, o.maps, handle, chunks=self.chunks, label="held-out errors",
                combine=concat_errors,
            )  # fmt: skip
        finally:
            self.run.release(handle)
        return E

    def reduce(self, E: np.ndarray) -> np.ndarray:
        """Held-out scores from per-curve errors (K, rows): their statistic over the curves (``score_name``)."""
        return score_statistic(self.score_name)(E, axis=1)

    def better(self, new_key, old_key) -> bool:
        """Whether candidate ``new_key`` beats ``old_key`` on the held-out curves: a fall of the score by more than
        ``significance`` paired standard errors (:func:`rffor.edge_rule.significantly_better`)."""
        new, old = (self.candidates[self.index[k]].errors for k in (new_key, old_key))
        return significantly_better(new, old, self.score_name, significance=self.significance, plateau=self.plateau)

    def add(self, key, score, B, passes, objective=None, sums=None, errors=None) -> int:
        lam, param, gamma = key
        o = self.outputs[gamma]
        if objective is None:
            objective = square_objective_from_sums(o.train, B, o.out.C_theta, lam, self.m)
        c = Candidate(float(lam), param, float(gamma), float(score), float(objective), int(passes), B, sums, errors)
        self.candidates.append(c)
        self.index[c.key] = len(self.candidates) - 1
        return self.index[c.key]

    def evaluate(self, key, warm) -> float:
        """The held-out score of ``key = (λ, param, γ_Θ)``, fitting it from ``warm`` (a coefficient matrix in
        the key's output factor, or a Candidate: its model is re-expressed in that factor, and its gradient sums
        reused when its loss and k_Θ are the key's) unless already done."""
        if key in self.index:
            return self.candidates[self.index[key]].score
        lam, param, gamma = key
        o = self.output(gamma)
        B, J, passes, sums = o.closed_form(self.m, lam), None, 0, None
        tic = time.perf_counter()
        if not self.loss.is_square:
            loss = self.loss if self.param_name is None else self.loss.with_param(param)
            if isinstance(warm, Candidate):
                start = o.out.coef_from(self.outputs[warm.gamma].out, warm.coef)
                sums0 = warm.sums if (warm.param, warm.gamma) == (param, gamma) else None
            else:
                start, sums0 = warm, None
            B, J, passes, sums = mm_minimize(
                o.metric, lam, start, self._gradient_pass(loss, o), self.tol, self.max_passes, sums0
            )
        E = self.errors(B[None], o)
        s = float(self.reduce(E)[0])
        self.add(key, s, B, passes, J, sums, errors=E[0])
        if passes:
            what = f"λ = {lam:.0e}" + (f", {self.param_name} = {param:.3g}" if self.param_name else "")
            if len(self.outputs) > 1:
                what += f", γ_Θ = {gamma:.3g}"
            self.say(
                f"selection: {what}: {passes} MM passes on {self.tr.n} training curves from its neighbour's model, "
                f"held-out {self.score_name} curve MSE {s:.4g} ({time.perf_counter() - tic:.1f} s)"
            )
        return s

    def _gradient_pass(self, loss, o: _Output):
        def gradient_pass(B):
            handle = self.run.share(np.ascontiguousarray(B))
            try:
                return self.run.reduce(
                    _train_grad_task, self.train, o.maps, handle, loss, chunks=self.chunks, label="selection pass"
                )
            finally:
                self.run.release(handle)

        return gradient_pass

    def walk(self, name: str, axis: Axis, first: int, start: float, point) -> float:
        """The edge rule's walk (:func:`rffor.edge_rule.walk`) along one hyperparameter from ``start``
        (``point(v)`` is the candidate ``(λ, param, γ_Θ)`` at value v), every candidate fitted from the one it
        steps from; returns the value reached."""

        def score(v, came_from):
            warm = self._nearest(point(v)) if came_from is None else self.candidates[self.index[point(came_from)]]
            return self.evaluate(point(v), warm=warm)

        w = walk(axis, start, score, first=first, better=lambda new, old: self.better(point(new), point(old)))
        self.log.append(f"{name} from {start:.3g}: " + ", ".join(w.trail) + f" → {w.best:.3g}")
        self.bounded[name] = w.at_limit
        self.statuses[name] = w.status
        self.say(f"selection: {name} walk: {self.log[-1]} ({w.status})")
        return w.best

    def _nearest(self, key) -> Candidate:
        """A warm start for ``key``: the evaluated candidate closest to it in log-λ, log-param and log-γ_Θ."""
        if key in self.index:
            return self.candidates[self.index[key]]
        lam, param, gamma = key

        def distance(c):
            d = abs(np.log(c.lam / lam)) + abs(np.log(c.gamma / gamma))
            if param is not None and c.param is not None:
                d += abs(np.log(c.param / param))
            return d

        return min(self.candidates, key=distance)
