"""The square loss's route (MATH.md §5, §5.2): the one-pass closed form.

Every partition task reduces the triangular factor of its rows' ``[Φ_X | Y Φ_Θ]`` where the data is
(:func:`rffor.solvers.sums.problem_sums`); the driver merges the factors and solves ``C_X B C_Θ + λ B = M`` from
the merged factor's SVD. Exact for (P_rf) on fully observed outputs. With missing outputs the sums see them filled
by the output space's rule (interpolated along θ for curves), and unless ``rff_method="closed_form"`` the MM route
(:mod:`rffor.solvers.routes.mm`), which masks them, finishes the fit from there.
"""

from __future__ import annotations

import time

import numpy as np

from ..fit_log import FitLog
from ..problem import RFProblem, Start
from ..result import RFFResult
from ..sums import closed_form_from_sums, problem_sums, square_objective_from_sums
from . import mm

__all__ = ["fit"]


def fit(run, problem: RFProblem, start: Start, log: FitLog) -> RFFResult:
    """Minimise (P_rf) for the square loss in closed form (module docstring).

    Parameters
    ----------
    run : executor session
    problem : RFProblem
        With the square loss.
    start : Start
        ``start.sums``: the problem's sums when a selection already computed them (no pass then).
    log : FitLog

    Returns
    -------
    RFFResult
        ``method="closed_form"``, or the MM route's result when missing outputs call for it.
    """
    tic = time.perf_counter()
    sums = start.sums if start.sums is not None else problem_sums(run, problem, "closed form")
    lam, m = problem.lam, problem.m
    B0 = closed_form_from_sums(sums, problem.C_theta, lam, m)
    J0 = square_objective_from_sums(sums, B0, problem.C_theta, lam, m)
    seconds = time.perf_counter() - tic
    log.record(
        {
            "round": -1,
            "t": 0,
            "steps": 0,
            "loss": J0 - 0.5 * lam * float(np.sum(B0 * B0)),
            "objective": J0,
            "seconds": seconds,
            "samples_per_s": sums.n / seconds if seconds > 0 else float("nan"),
        }
    )
    P = len(run.partitions)
    log.message(
        f"closed form: feature sums over all {sums.n} curves computed by {P} partition task(s) where the "
        f"data is, solved on the driver; objective {J0:.6g}"
        + (" (on filled outputs)" if sums.n_missing else "")
        + f" ({seconds:.1f} s)"
    )
    if problem.settings.rff_method == "closed_form" or sums.n_missing == 0:
        return RFFResult.of(problem, B0, n_iter=0, history=log.history, method="closed_form", n_partitions=P)
    # missing outputs: MM on the masked objective finishes the fit
    return mm.fit(run, problem, Start(coef=B0, sums=sums), log)
