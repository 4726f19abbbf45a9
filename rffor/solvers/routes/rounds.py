"""The doubly stochastic route (MATH.md §5): rounds of local DSGD with periodic parameter averaging.

Each round, every partition runs K local steps from the current state on its own rows where the data is
(:func:`rffor.solvers.round_plan.round_task`, seeded by ``(random_state, round, partition)``); the partitions'
weighted states merge by the executor's fixed tree on the workers (:class:`rffor.solvers.round_plan.RoundSums`), and
the driver receives their average, writes a checkpoint and reports progress. The start is the square loss's closed
form on a sample of curves spread over the data, refined by reweighted closed forms for losses with IRLS weights
(:mod:`rffor.solvers.warm_start`), or zero; the steps are preconditioned by ``(C_X + λI)^{-1}`` on the top
eigenvectors of that sample's feature covariance.
"""

from __future__ import annotations

import math
import time

import numpy as np

from ..dsgd import LevelSampler, Preconditioner, SGDConfig, SGDState, epoch_steps
from ..fit_log import FitLog
from ..problem import RFProblem, Start
from ..result import RFFResult
from ..round_plan import RoundPlan, auto_step_size, finish_round, round_task
from ..sums import problem_sums, sample_session
from ..warm_start import closed_form_start

__all__ = ["fit"]


def fit(run, problem: RFProblem, start: Start, log: FitLog) -> RFFResult:
    """Minimise (P_rf) by rounds of local DSGD with averaging (module docstring).

    Parameters
    ----------
    run : executor session
    problem : RFProblem
    start : Start
        ``state``: resume from a checkpoint's ``B``, ``B_avg``, ``t`` at round ``first``; else the closed-form warm
        start (``init="closed_form"``) or zero.
    log : FitLog

    Returns
    -------
    RFFResult
        ``method="sgd"``: the Polyak–Ruppert average ``B_avg``; ``state`` holds ``B``, ``B_avg`` and ``t``.
    """
    s, data, lam, P = problem.settings, problem.data, problem.lam, len(run.partitions)
    dtype, m, phi_x, Phi_theta = s.dtype, problem.m, problem.input_features, problem.Phi_theta
    sums = start.sums
    if start.state is not None:
        state = SGDState(B=start.state["B"], B_avg=start.state["B_avg"], t=int(np.asarray(start.state["t"]).item()))
    elif s.init == "closed_form":
        B0, sums = closed_form_start(run, problem, log, reweight=True)
        state = SGDState.from_coef(B0, dtype)
    else:
        state = SGDState.zeros(phi_x.n_features, Phi_theta.shape[1], dtype)
    if sums is None and s.precondition_rank > 0:  # resumed, or started from zero: the preconditioner's covariance
        with sample_session(run, data, problem.metric_chunks) as (over, chunks):
            sums = problem_sums(over, problem, "covariance", chunks=chunks)

    # ---- the plan of the rounds: steps, step size, preconditioner ----------------------------------------------
    batch_size = s.batch_size
    E = max(epoch_steps(data, part, batch_size) for part in run.partitions)
    T = math.ceil(s.n_epochs * E)
    if s.max_steps is not None:
        T = min(T, s.max_steps)
    K = E if s.local_steps is None else s.local_steps
    round_steps = [K] * (T // K) + ([T % K] if T % K else [])
    M = s.n_theta_samples
    sampler = None
    if s.level_sampling is not None:
        offset = getattr(problem.space, "offset", None)
        sampler = LevelSampler(8 if M is None else M, s.level_sampling, problem.output.features, offset)
    subsample = sampler is not None or (M is not None and problem.loss.integral and M < m)
    eta0 = auto_step_size(problem.C_theta, lam, subsample=subsample) if s.step_size == "auto" else s.step_size
    precond = None
    if s.precondition_rank > 0:
        tic = time.perf_counter()
        precond = Preconditioner.from_gram(sums.xx / sums.n, lam, s.precondition_rank, dtype)
        log.message(
            f"preconditioner: rank {precond.rank} from the feature covariance of {sums.n} curves (eigendecomposition "
            f"of a {phi_x.n_features} x {phi_x.n_features} matrix on the driver, {time.perf_counter() - tic:.1f} s)"
        )
        if s.step_size == "auto":
            # preconditioned, the curvature along an eigenvector of C_X is (s ‖C_Θ‖ + λ)/(s + λ) <= max(‖C_Θ‖, 1) on
            # the full data, and a minibatch step is up to trace/b times as curved
            eta0 = min(eta0, 0.99) / max(1.0, precond.trace / batch_size)
    average_start = T // 2 if s.average_start == "auto" else s.average_start
    config = SGDConfig(
        loss=problem.loss,
        lam=lam,
        batch_size=batch_size,
        n_theta_samples=M,
        step_size=eta0,
        step_decay=s.step_decay,
        step_offset=s.step_offset,
        average_start=int(average_start),
        dtype=dtype,
        precond=precond,
        sampler=sampler,
        theta=np.asarray(data.theta, dtype=np.float64),
        lam_nc=s.lam_nc,
    )
    n_active = sum(1 for part in run.partitions if epoch_steps(data, part, batch_size) > 0)
    plan = RoundPlan(round_steps, config, phi_x, Phi_theta, problem.random_state, n_partitions=P, n_active=n_active)
    plan_h = run.share(plan)  # once: the configuration, the preconditioner and Φ_Θ do not change between rounds
    n_rounds = plan.n_rounds
    log.message(
        f"DSGD: {n_rounds} round(s) of {K} local steps x {P} partition(s) over all {data.n} curves (each partition "
        f"steps on its own rows where the data is, then the driver averages), batch {batch_size}, "
        f"D_x = {phi_x.n_features}, D_θ = {Phi_theta.shape[1]}"
    )
    log.start(n_rounds, start.first)
    state = state.copy()
    for r in range(start.first, n_rounds):
        tic = time.perf_counter()
        state_h = run.share(state)
        try:
            sums = run.reduce(round_task, plan_h, state_h, r, label=f"round {r + 1}")
        finally:
            run.release(state_h)
        state, steps, loss_sum = finish_round(state, sums)
        seconds = time.perf_counter() - tic
        mean_loss = loss_sum / steps if steps else float("nan")
        record = {
            "round": r,
            "t": state.t,
            "steps": steps,
            "loss": mean_loss,
            "objective": mean_loss + 0.5 * lam * float(np.sum(state.B_avg * state.B_avg)),
            "seconds": seconds,
            "samples_per_s": steps * batch_size / seconds if seconds > 0 else float("nan"),
        }
        log.completed(r, _state(state), record)
    return RFFResult.of(
        problem, state.B_avg, n_iter=state.t, history=log.history, method="sgd", n_partitions=P,
        state=_state(state), plan=plan,
    )  # fmt: skip


def _state(state: SGDState) -> dict:
    """The checkpointable DSGD state as plain arrays."""
    return {"B": state.B, "B_avg": state.B_avg, "t": np.array(int(state.t), dtype=np.int64)}
