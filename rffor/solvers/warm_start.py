"""Warm starts of the robust routes (MATH.md §5): the square loss's closed form on a sample of curves, refined by
reweighted closed forms for losses that offer IRLS weights (:attr:`rffor.losses.Loss.has_irls_weights`)."""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import numpy as np

from ..losses import Loss
from .sums import closed_form_from_sums, sample_session, sums_task

__all__ = ["reweighted_closed_form", "closed_form_start"]


def reweighted_closed_form(
    run,
    maps,
    C_theta: np.ndarray,
    loss: Loss,
    lam: float,
    B0: np.ndarray,
    chunks: Sequence[int] | None = None,
    *,
    m: int,
    max_iter: int = 10,
    tol: float = 1e-3,
) -> tuple[np.ndarray, list[float]]:
    """Warm start of a loss offering IRLS weights: closed forms of the reweighted square loss from B0.

    The square-loss closed form at a small λ fits the outliers, mostly along the directions of small variance of
    the input features, which DSGD moves slowest (even preconditioned, beyond its rank): started there, a robust
    fit stays near the non-robust solution for many epochs. Each reweighting is one reduce over the rows (``O(rows
    D_x²)``, on the workers) and one eigendecomposition of C_X (on the driver); for H_κ^2 the weights make a
    majoriser and the objective decreases monotonically.

    Parameters
    ----------
    run : executor session (:mod:`rffor.executor`)
    maps : FitMaps or a handle of it from ``run.share``
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
    loss : Loss
        With :meth:`~rffor.losses.Loss.irls_weights`.
    lam : float
    B0 : ndarray of shape (D_x, D_θ)
        Start (the square-loss closed form).
    chunks : sequence of int, optional
        The rows' chunks (default all).
    m : int
        Grid size.
    max_iter : int, default 10
        Reweighted solves at most.
    tol : float, default 1e-3
        Stop when an iteration lowers the objective ``(1/n) Σ L(r_i) + (λ/2)‖B‖²`` on these rows by less than
        ``tol`` times its value.

    Returns
    -------
    B : ndarray of shape (D_x, D_θ), float64
        The iterate of lowest objective.
    objectives : list of float
        The objective of B0 and of every iterate evaluated.
    """
    B = np.asarray(B0, dtype=np.float64)
    best, best_obj, objectives = B, math.inf, []
    for it in range(max_iter + 1):
        wsums = run.reduce(sums_task, maps, B, loss, chunks=chunks, label=f"reweighting {it}")
        obj = wsums.loss / max(wsums.n, 1) + 0.5 * lam * float(np.sum(B * B))
        objectives.append(obj)
        if obj < best_obj:
            improvement = best_obj - obj
            best, best_obj = B, obj
            if improvement <= tol * abs(obj):
                break
        else:  # H_κ^1's curve weights are not a majoriser: stop at the first step that does not help
            break
        if it == max_iter:
            break
        B = closed_form_from_sums(wsums, C_theta, lam, m)
    return best, objectives


def closed_form_start(run, problem, log, *, reweight: bool = False):
    """The square loss's closed form on the rows of ``problem.metric_chunks`` (whole chunks spread over the data;
    a strict sample of them is shared by all partitions in row pieces: :func:`~rffor.solvers.sums.sample_session`),
    the warm start of the robust routes, refined by reweighted closed forms when ``reweight`` and the loss offers
    IRLS weights (``init_reweight`` of them at most). Quantile functions fit ``Y + shift`` (the output space's
    :meth:`~rffor.outputs.levels.QuantileLevels.init_shift`).

    Returns
    -------
    B0 : ndarray of shape (D_x, D_θ), float64
    sums : FeatureSums
        The closed form's sums of those rows (their covariance is the MM metric or the preconditioner).
    """
    tic = time.perf_counter()
    data, warm = problem.data, problem.metric_chunks
    with sample_session(run, data, warm) as (over, chunks):
        shift = problem.space.init_shift()
        sums = over.reduce(sums_task, problem.maps, None, None, shift, chunks=chunks, label="warm start")
        B0 = closed_form_from_sums(sums, problem.C_theta, problem.lam, problem.m)
        reweighted = ""
        if reweight and problem.settings.init_reweight > 0 and problem.loss.has_irls_weights:
            B0, objectives = reweighted_closed_form(
                over, problem.maps, problem.C_theta, problem.loss, problem.lam, B0, chunks, m=problem.m,
                max_iter=problem.settings.init_reweight,
            )  # fmt: skip
            reweighted = (
                f", then {len(objectives) - 1} reweighted closed form(s) on the same curves: objective on them "
                f"{objectives[0]:.4g} → {min(objectives):.4g}"
            )
    which = (
        "all chunks"
        if warm is None or len(warm) == data.n_chunks
        else f"{len(warm)} of {data.n_chunks} chunks, shared by the {len(run.partitions)} partitions in row pieces"
    )
    log.message(
        f"warm start: square-loss closed form on {sums.n} curves ({which}), sums computed where the data is, solved "
        f"on the driver{reweighted} ({time.perf_counter() - tic:.1f} s)"
    )
    return B0, sums
