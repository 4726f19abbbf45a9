"""Automatic λ for the random-feature fit (``lam="auto"``): a whole grid of λ fitted in the same passes over the
data and compared on held-out rows.

The route, inside :func:`rffor.solvers.rff.fit_rff`'s executor session (every pass a task per partition where the
data is; the driver only combines small matrices):

1. rows are split by :class:`rffor.chunked.RowSplit`: about one in ``modulus`` held out, spread over every chunk;
2. one pass: the closed-form sums (:class:`~rffor.solvers.rff.FeatureSums`) of the training rows and of the
   held-out rows (:func:`split_sums_task`);
3. one eigendecomposition of the training rows' feature covariance C_X (:class:`~rffor.solvers.mm.SquareMetric`)
   gives the square-loss closed form of (P_rf) at every λ (MATH.md §5: ``C_X B C_Θ + λ B = M``) for a solve each;
4. other losses: an accelerated MM run per λ (:class:`~rffor.solvers.mm.MMRun`) from its closed form, all runs
   advanced in lockstep: each pass computes the features of a block once and the gradient sums of every run still
   going (:func:`~rffor.solvers.mm.grad_task` on stacked coefficients), so a grid of K values costs the passes of
   its slowest run, each pass ``1 + O(K D_θ / (d + D_x))`` times a single fit's;
5. one pass over the held-out rows: each curve's mean squared error under every model
   (:func:`~rffor.solvers.mm.curve_errors_task`), scored by their median for a robust loss (paper 000 §5.1: a
   minority of outlying validation curves does not move it) or their mean for the square loss;
6. a grid edge never wins silently: if the best λ is the smallest (largest) of the grid, the grid is extended by
   further decades in that direction (at most ``max_extensions`` times, and not after an extension that improved
   the score by less than ``plateau``), the new values fitted the same way; ``LamPath.extensions`` says what
   happened and ``LamPath.at_edge`` whether the choice is still an end of the grid.

:func:`fit_rff` then fits the selected λ on all rows: the square loss's closed form from the two sums (no further
pass), other losses by MM passes started from the selected path model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .._linalg import inner
from ..chunked import RowSplit
from ..losses import Loss
from .mm import GradSums, MMRun, SquareMetric, curve_errors_task, grad_task

__all__ = ["DEFAULT_LAMS", "LamPath", "SplitSums", "split_sums_task", "fit_lam_path"]

#: the default grid of ``lam="auto"``: decades 1e-3 … 1e-12 (features are normalised, ‖φ_X‖ = 1, so the useful λ
#: depends on the data's size and noise, not on its units); extended automatically past an edge
DEFAULT_LAMS = tuple(10.0**-k for k in range(3, 13))


@dataclass
class SplitSums:
    """Closed-form sums of the two sides of a row split (``+`` adds them side by side: the reduce step)."""

    train: object
    held: object

    def __add__(self, other: SplitSums) -> SplitSums:
        return SplitSums(self.train + other.train, self.held + other.held)


def split_sums_task(part, p: int, chunk_ids, maps, split: RowSplit) -> SplitSums:
    """Closed-form sums of a partition's training rows and held-out rows (both read in one pass of its chunks).

    Parameters
    ----------
    part : chunked dataset
    p : int
    chunk_ids : sequence of int
    maps : FitMaps
    split : RowSplit

    Returns
    -------
    SplitSums
        Two :class:`~rffor.solvers.rff.FeatureSums`.
    """
    from .rff import feature_sums

    chunks = [(i, X, Y) for i, X, Y in part.iter_chunks([int(i) for i in chunk_ids])]
    sides = []
    for held in (False, True):
        view = split.side(held).view(_Chunks(part, chunks))
        sides.append(feature_sums(view, maps.input_features, maps.Phi_theta, [i for i, _, _ in chunks], maps=maps))
    return SplitSums(*sides)


class _Chunks:
    """Chunks already read, with the part of the chunked-data protocol a split view and feature_sums use."""

    def __init__(self, data, chunks):
        self.theta, self.m, self.d, self.chunk_rows = data.theta, data.m, data.d, data.chunk_rows
        self._chunks = chunks
        self.n_chunks = len(chunks)

    def iter_chunks(self, chunk_ids=None, **_):
        yield from self._chunks


def _train_grad_task(part, p, chunk_ids, split: RowSplit, maps, Bs, loss):
    """:func:`~rffor.solvers.mm.grad_task` on the training side of the split of the partition's rows."""
    return grad_task(split.view(part), p, chunk_ids, maps, Bs, loss)


def _held_errors_task(part, p, chunk_ids, split: RowSplit, maps, Bs):
    """:func:`~rffor.solvers.mm.curve_errors_task` on the held-out side of the split of the partition's rows."""
    return curve_errors_task(split.view(part), p, chunk_ids, maps, Bs)


@dataclass
class LamPath:
    """The λ path of a fit.

    Attributes
    ----------
    lams : ndarray of shape (K,)
        The grid, decreasing (after any extension).
    scores : ndarray of shape (K,)
        Held-out score of each λ's model (median or mean over held-out curves of their MSE; lower is better).
    best : int
        Index of the selected λ.
    coefs : ndarray of shape (K, D_x, D_θ), float64
        The path's models (fitted on the training rows).
    objectives : ndarray of shape (K,)
        Their training objectives J (MATH.md (P_rf) on the training rows).
    passes : int
        Gradient passes of the lockstep MM (0 for the square loss).
    extensions : list of str
        Grid extensions made ("down: 1e-13, 1e-14" …).
    score_name : str
        "median" or "mean" over held-out curves.
    n_train, n_held : int
        Rows on each side.
    sums : SplitSums
    """

    lams: np.ndarray
    scores: np.ndarray
    best: int
    coefs: np.ndarray
    objectives: np.ndarray
    passes: int
    extensions: list[str]
    score_name: str
    n_train: int
    n_held: int
    sums: SplitSums = field(repr=False)

    @property
    def at_edge(self) -> bool:
        """Whether the selected λ is still an end of the (extended) grid."""
        return self.best in (0, len(self.lams) - 1)

    @property
    def lam(self) -> float:
        """The selected λ."""
        return float(self.lams[self.best])

    def to_dict(self) -> dict:
        """JSON-ready summary (no coefficients)."""
        return {
            "lams": self.lams.tolist(),
            "scores": self.scores.tolist(),
            "objectives": self.objectives.tolist(),
            "lam": self.lam,
            "score": self.score_name,
            "passes": self.passes,
            "extensions": list(self.extensions),
            "n_train": self.n_train,
            "n_held": self.n_held,
        }


def fit_lam_path(
    run,
    maps,
    C_theta: np.ndarray,
    loss: Loss,
    lams,
    *,
    m: int,
    split: RowSplit,
    tol: float,
    max_passes: int,
    max_extensions: int = 3,
    plateau: float = 0.01,
    progress=None,
) -> LamPath:
    """Fit every λ of ``lams`` on the training rows of ``split`` and score it on the held-out rows (module docstring).

    Parameters
    ----------
    run : executor session
    maps : handle of FitMaps (as shared with the session)
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
    loss : Loss
    lams : sequence of float
        The grid (any order; fitted from the largest down).
    m : int
        Grid size of the outputs.
    split : RowSplit
    tol, max_passes : float, int
        MM stopping rule and pass budget of every run (:class:`MMRun`).
    max_extensions : int, default 3
        Grid extensions past an edge before the edge is accepted (and reported in ``extensions``).
    plateau : float, default 0.01
        Extending stops early when an extension improved the best held-out score by less than this fraction: the
        score is flat past the edge (typically λ → 0 once the features' rank, not λ, limits the model), and
        further values would only cost passes. Reported in ``extensions``.
    progress : rffor.progress.Progress, optional

    Returns
    -------
    LamPath
    """
    say = progress.message if progress is not None else (lambda _: None)
    tic = time.perf_counter()
    sums = run.reduce(split_sums_task, maps, split, label="closed form sums (training and held-out rows)")
    tr = sums.train
    if tr.n == 0 or sums.held.n == 0:
        raise ValueError(
            f"lam='auto' needs training and held-out rows; the split of {tr.n + sums.held.n} rows gave "
            f"{tr.n} and {sums.held.n}"
        )
    metric = SquareMetric(tr.xx / tr.n, C_theta, float(np.max(lams)))
    M = tr.xy / (tr.n * m)
    say(
        f"λ path: sums of {tr.n} training and {sums.held.n} held-out curves computed by the partition tasks, one "
        f"eigendecomposition of C_X on the driver ({time.perf_counter() - tic:.1f} s)"
    )
    score_name = "mean" if loss.is_square else "median"
    lams_all: list[float] = []
    coefs: list[np.ndarray] = []
    objectives: list[float] = []
    scores: list[float] = []
    extensions: list[str] = []
    passes, previous = 0, float("inf")
    new = sorted({float(v) for v in lams}, reverse=True)
    for extension in range(max_extensions + 1):
        B_new, J_new, p_new = _fit_grid(run, maps, metric, M, tr, C_theta, m, loss, new, split, tol, max_passes, say)
        passes += p_new
        handle = run.share(np.ascontiguousarray(B_new))
        try:
            errors = run.map(_held_errors_task, split.side(True), maps, handle, label="held-out errors")
        finally:
            run.release(handle)
        E = np.concatenate([e for e in errors if e is not None], axis=1)  # (K, held rows)
        s_new = np.median(E, axis=1) if score_name == "median" else np.mean(E, axis=1)
        lams_all += new
        coefs += list(B_new)
        objectives += list(J_new)
        scores += s_new.tolist()
        order = np.argsort(lams_all)[::-1]
        lam_sorted = np.asarray(lams_all)[order]
        best = int(np.argmin(np.asarray(scores)[order]))
        say(
            "λ path: held-out "
            + score_name
            + " curve MSE "
            + ", ".join(f"{lam_sorted[i]:.0e}: {np.asarray(scores)[order][i]:.4g}" for i in range(len(order)))
        )
        if 0 < best < len(order) - 1:
            break
        if extension and previous - np.asarray(scores)[order][best] < plateau * previous:
            extensions.append(f"stopped: the last extension improved the held-out score by < {plateau:.0%}")
            say(f"λ path: {extensions[-1]}")
            break
        if extension == max_extensions:
            say(f"λ path: warning: the best λ is still an edge of the grid after {max_extensions} extensions")
            break
        previous = float(np.asarray(scores)[order][best])
        if best == len(order) - 1:
            new = [lam_sorted[-1] / 10.0**k for k in (1, 2)]
            extensions.append("down: " + ", ".join(f"{v:.0e}" for v in new))
        else:
            new = [lam_sorted[0] * 10.0**k for k in (2, 1)]
            extensions.append("up: " + ", ".join(f"{v:.0e}" for v in new))
        say(f"λ path: the best λ is at an edge of the grid; extending it ({extensions[-1]})")
    return LamPath(
        lams=lam_sorted,
        scores=np.asarray(scores)[order],
        best=best,
        coefs=np.stack([coefs[i] for i in order]),
        objectives=np.asarray(objectives)[order],
        passes=passes,
        extensions=extensions,
        score_name=score_name,
        n_train=int(tr.n),
        n_held=int(sums.held.n),
        sums=sums,
    )


def _fit_grid(run, maps, metric, M, tr, C_theta, m, loss, lams, split, tol, max_passes, say):
    """Models of (P_rf) on the training rows at every λ of ``lams``: closed forms, then lockstep MM for a non-square
    loss. Returns ``(coefs (K, D_x, D_θ), objectives (K,), passes)``."""
    from .rff import square_objective_from_sums

    B = np.stack([metric.solve(M, 1.0, lam) for lam in lams])
    if loss.is_square:
        return B, np.array([square_objective_from_sums(tr, B[k], C_theta, lam, m) for k, lam in enumerate(lams)]), 0
    train = split.side(False)
    gs = _stacked_pass(run, maps, train, B, loss, "λ path pass 1")
    runs = []
    for k, lam in enumerate(lams):
        J, grad = _objective(gs, k, B[k], lam), _gradient(gs, k, B[k], lam)
        runs.append(MMRun(metric, lam, B[k], B[k].copy(), J, grad, tol))
    passes = 1
    while passes < max_passes:
        points = {k: r.propose() for k, r in enumerate(runs) if not r.converged}
        points = {k: Y for k, Y in points.items() if Y is not None}
        if not points:
            break
        ks = sorted(points)
        gs = _stacked_pass(run, maps, train, np.stack([points[k] for k in ks]), loss, f"λ path pass {passes + 1}")
        passes += 1
        for j, k in enumerate(ks):
            Y, lam = points[k], runs[k].lam
            runs[k].update(Y, _objective(gs, j, Y, lam), _gradient(gs, j, Y, lam))
        say(f"λ path pass {passes}: {len(ks)} of {len(runs)} λ still converging")
    return np.stack([r.B for r in runs]), np.array([r.J for r in runs]), passes


def _stacked_pass(run, maps, train, Bs, loss, label) -> GradSums:
    handle = run.share(np.ascontiguousarray(Bs))
    try:
        return run.reduce(_train_grad_task, train, maps, handle, loss, label=label)
    finally:
        run.release(handle)


def _objective(gs: GradSums, k: int, B: np.ndarray, lam: float) -> float:
    """``J(B) = (1/n) Σ L(r_i) + (λ/2) ‖B‖²`` of the k-th stacked model."""
    return float(gs.loss[k]) / gs.n + 0.5 * lam * inner(B, B)


def _gradient(gs: GradSums, k: int, B: np.ndarray, lam: float) -> np.ndarray:
    """``∇J(B) = −g/n + λ B`` of the k-th stacked model."""
    return -gs.g[k] / gs.n + lam * B
