"""The robust losses' route (MATH.md §5): full-batch majorize–minimize passes (:mod:`rffor.solvers.mm`).

From a start (a selected candidate, the square loss's closed form on the metric's curves, zero, or a checkpoint),
every pass is a map-reduce of the gradient over all curves where the data is (over both sides of a selection's row
split when there is one: the refit reads the features the selection's passes cached), and the driver takes the
accelerated MM step ``B − (c H)⁻¹ ∇J`` in the metric H of the feature covariance. J never increases between
accepted passes; the route stops when the bound promises a decrease below ``tol`` × J, or warns at ``max_passes``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ...executor import chunkwise
from ..fit_log import FitLog
from ..mm import MMRun, SquareMetric, grad_task, mm_steps
from ..problem import RFProblem, Start
from ..result import RFFResult
from ..sums import problem_sums, sample_session
from ..warm_start import closed_form_start

__all__ = ["fit", "both_sides_grad_task"]


@chunkwise
def both_sides_grad_task(part, p, chunk_ids, split, maps, B, loss):
    """:func:`~rffor.solvers.mm.grad_task` over all the partition's rows, summed side by side of the split: the
    refit after a selection reads the features the selection's passes cached for each side."""
    return grad_task(split.side(False).view(part), p, chunk_ids, maps, B, loss) + grad_task(
        split.side(True).view(part), p, chunk_ids, maps, B, loss
    )


def fit(run, problem: RFProblem, start: Start, log: FitLog) -> RFFResult:
    """Minimise (P_rf) by MM passes (module docstring).

    Parameters
    ----------
    run : executor session
    problem : RFProblem
    start : Start
        ``coef``: start there (with its ``sums``, the metric's); ``state``: resume from a checkpoint's ``B`` and
        ``B_prev`` at pass ``first``; neither: the closed-form warm start (``init="closed_form"``) or zero.
    log : FitLog

    Returns
    -------
    RFFResult
        ``method="mm"``; ``state`` holds the final ``B`` and ``B_prev``.
    """
    s = problem.settings
    B0, sums = start.coef, start.sums
    if start.state is None and B0 is None and s.init == "closed_form":
        B0, sums = closed_form_start(run, problem, log)
    if sums is None:  # resumed, or started from zero: the feature covariance for the metric
        with sample_session(run, problem.data, problem.metric_chunks) as (over, chunks):
            sums = problem_sums(over, problem, "covariance", chunks=chunks)
    tic = time.perf_counter()
    metric = SquareMetric.from_sums(sums, problem.C_theta, problem.lam)
    D_x = problem.input_features.n_features
    log.message(
        f"MM metric: the square loss's Hessian from the feature covariance of {sums.n} curves (one SVD of their "
        f"{D_x} x {D_x} triangular factor on the driver, {time.perf_counter() - tic:.1f} s)"
    )
    if start.state is not None:
        B = np.array(start.state["B"], dtype=np.float64)
        B_prev = np.array(start.state["B_prev"], dtype=np.float64)
    else:
        B = np.zeros(problem.shape) if B0 is None else np.asarray(B0, dtype=np.float64)
        B_prev = B.copy()
    return _passes(run, problem, metric, B, B_prev, start.first, log)


def _state(B: np.ndarray, B_prev: np.ndarray) -> dict:
    """The checkpointable MM state: the current point and the previous iterate of the momentum (float64)."""
    return {"B": np.array(B, dtype=np.float64), "B_prev": np.array(B_prev, dtype=np.float64)}


def _passes(run, problem: RFProblem, metric, B, B_prev, first: int, log: FitLog) -> RFFResult:
    """Accelerated MM passes from B (``first > 0``: a resumed fit, whose last record holds c and the momentum)."""
    s, loss, lam, n, P = problem.settings, problem.loss, problem.lam, problem.n, len(run.partitions)
    warm_coef = B.copy()
    c = float(log.history[-1].get("c", 1.0)) if first > 0 else 1.0
    max_passes, tol = s.max_passes, s.tol
    log.message(
        f"MM: full-batch passes over all {n} curves (each pass: gradient sums computed by {P} partition "
        f"task(s) where the data is, the step solved on the driver), at most {max_passes}, until the bound promises "
        f"a decrease below {tol:g} x J"
    )
    log.start(max_passes, first)
    timing = {}

    def gradient_pass(Bk):
        tic = time.perf_counter()
        handle = run.share(Bk)
        try:
            label = f"pass {timing['k'] + 1}"
            if problem.split is None:
                gs = run.reduce(grad_task, problem.maps, handle, loss, label=label)
            else:
                gs = run.reduce(both_sides_grad_task, problem.split, problem.maps, handle, loss, label=label)
        finally:
            run.release(handle)
        timing["seconds"] = time.perf_counter() - tic
        return gs

    k = timing["k"] = first
    gs = gradient_pass(B)
    t = float(log.history[-1].get("momentum", 1.0)) if first > 0 else 1.0
    mm = MMRun(metric, lam, B, B_prev, gs.objective(B, lam), gs.gradient(B, lam), tol, t=t, c=c)
    if first == 0:
        log.completed(k, _state(B, B_prev), _record(k, gs, mm.J, mm.J, True, c, t, float("nan"), timing["seconds"]))
        k = timing["k"] = k + 1
    for Y, gs, accepted in mm_steps(mm, gradient_pass, max_passes - k):
        J_new = gs.objective(Y, lam)
        record = _record(k, gs, J_new, mm.J, accepted, mm.c, mm.t, mm.decrement, timing["seconds"])
        log.completed(k, _state(mm.B, mm.B_prev), record)
        k = timing["k"] = k + 1
    if mm.converged:
        log.message(
            f"MM converged: the bound promises a decrease of {mm.decrement / 2:.3g} <= {tol:g} x J = {mm.J:.6g}"
        )
    else:  # a model short of the optimum must not pass for a converged one (at small κ and λ MM needs >100 passes)
        warnings.warn(
            f"MM stopped at max_passes={max_passes} before the bound promised a decrease below tol={tol:g} x J "
            f"(J = {mm.J:.6g}); increase max_passes (the estimator's max_iter) or tol",
            ConvergenceWarning,
            stacklevel=4,
        )
    return RFFResult.of(
        problem, mm.B, n_iter=k, history=log.history, method="mm", n_partitions=P,
        state=_state(mm.B, mm.B_prev), warm_coef=warm_coef.astype(problem.dtype),
    )  # fmt: skip


def _record(k, gs, evaluated, J, accepted, c, momentum, dec, seconds) -> dict:
    return {
        "round": k,
        "t": k + 1,
        "steps": 1,
        "loss": gs.loss / gs.n,
        "objective": J,
        "evaluated": evaluated,
        "accepted": bool(accepted),
        "c": c,
        "momentum": momentum,
        "decrement": dec,
        "seconds": seconds,
        "samples_per_s": gs.n / seconds if seconds > 0 else float("nan"),
    }
