"""The plan of DSGD rounds with periodic averaging (MATH.md §5): what every partition task of every round reads
(:class:`RoundPlan`, shared once per fit), the task itself (:func:`round_task`: K local steps of
:func:`rffor.solvers.dsgd.partition_steps`, seeded by ``(random_state, round, partition)``), the average of the
partitions' states and a stable step size (:func:`auto_step_size`).

The average ``Σ_p w_p B_p`` with ``w_p = steps_p / Σ steps`` is a plain sum once every task weighs its own state:
the planned steps of a round are the same K for every partition with rows, so a task knows its weight
``K / (K · P_rows)`` before the round (:attr:`RoundPlan.n_active`), returns :class:`RoundSums`, and the partials merge
by the executor's fixed tree on the workers (MATH.md §5.2), the driver receiving one state per round.
:func:`average_states` is the same average from the partitions' states gathered on the driver (the reference)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dsgd import SGDConfig, SGDState, partition_steps

__all__ = ["RoundPlan", "RoundSums", "round_task", "finish_round", "average_states", "auto_step_size"]


@dataclass
class RoundPlan:
    """What the partition tasks of every round need besides their data and the state; shared once per fit.

    Attributes
    ----------
    round_steps : list of int
        K of each round: the local steps every partition runs in that round.
    config : SGDConfig
        With the preconditioner.
    input_features : feature map
        φ_X (random Fourier features pickle without their frequencies).
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid, in ``config.dtype``.
    random_state : int
        Seeds task (round r, partition p) with ``(random_state, r, p)``.
    n_partitions : int
        P.
    n_active : int or None
        Partitions with rows (each runs the round's K steps): a task's weight in the average is
        ``K / (K · n_active)``. None: P.
    """

    round_steps: list[int]
    config: SGDConfig
    input_features: Any
    Phi_theta: np.ndarray
    random_state: int
    n_partitions: int = 1
    n_active: int | None = None

    @property
    def n_rounds(self) -> int:
        return len(self.round_steps)

    def seed(self, round: int, partition: int) -> tuple[int, int, int]:
        """Seed of task (round, partition)."""
        return (self.random_state, int(round), int(partition))

    def run_partition(self, data, partition: int, chunk_ids, state: SGDState, round: int):
        """One partition's K local steps of one round: :func:`rffor.solvers.dsgd.partition_steps`."""
        return partition_steps(
            state,
            data,
            chunk_ids,
            self.round_steps[round],
            self.config,
            self.input_features,
            self.Phi_theta,
            self.seed(round, partition),
        )


@dataclass
class RoundSums:
    """A partition's share of a round's average (``+`` adds two of them: the merge step of the tree).

    Attributes
    ----------
    B, B_avg : ndarray of shape (D_x, D_θ), float64
        ``w_p B_p`` and ``w_p B_avg,p`` summed over the partitions merged so far.
    steps : int
        Their steps.
    max_steps : int
        The largest steps of one partition (the global counter t advances by it).
    loss_sum : float
        Their minibatch loss sums.
    """

    B: np.ndarray
    B_avg: np.ndarray
    steps: int
    max_steps: int
    loss_sum: float

    def __add__(self, other: RoundSums) -> RoundSums:
        return RoundSums(
            self.B + other.B,
            self.B_avg + other.B_avg,
            self.steps + other.steps,
            max(self.max_steps, other.max_steps),
            self.loss_sum + other.loss_sum,
        )


def round_task(part, p: int, chunk_ids, plan: RoundPlan, state: SGDState, round: int) -> RoundSums | None:
    """A task of a round (:meth:`executor session.reduce`): partition p's local steps, its state weighted by
    ``steps / (K · n_active)``; None when it made no step."""
    st, steps, loss_sum = plan.run_partition(part, p, chunk_ids, state, round)
    if not steps:
        return None
    total = plan.round_steps[round] * (plan.n_active or plan.n_partitions)
    w = steps / total
    return RoundSums(
        np.asarray(w * st.B, dtype=np.float64), np.asarray(w * st.B_avg, dtype=np.float64), steps, steps, loss_sum
    )


def finish_round(state: SGDState, sums: RoundSums | None) -> tuple[SGDState, int, float]:
    """The state after a round from the merged :class:`RoundSums` (None: no partition stepped): the averaged B in
    the state's dtype, B_avg in float64, t advanced by the largest steps; returns ``(state, steps, loss_sum)``."""
    if sums is None or sums.steps == 0:
        return state.copy(), 0, 0.0
    return SGDState(sums.B.astype(state.B.dtype), sums.B_avg, state.t + sums.max_steps), sums.steps, sums.loss_sum


def average_states(state: SGDState, results: Sequence[tuple[SGDState, int, float]]) -> tuple[SGDState, int, float]:
    """Average the partitions' states weighted by their steps, in the given (partition) order.

    Returns
    -------
    state : SGDState
        ``B = Σ_p w_p B_p`` and ``B_avg = Σ_p w_p B_avg,p`` with ``w_p = steps_p / Σ steps`` (sums in float64, in
        partition order), ``t`` advanced by the largest ``steps_p``. With one partition, exactly its state.
    steps : int
        Total steps of the round over partitions.
    loss_sum : float
        Total of the partitions' loss sums.
    """
    total = sum(int(r[1]) for r in results)
    loss_sum = float(sum(float(r[2]) for r in results))
    if total == 0:
        return state.copy(), 0, loss_sum
    B = np.zeros(state.B.shape, dtype=np.float64)
    B_avg = np.zeros(state.B_avg.shape, dtype=np.float64)
    for st, steps, _ in results:
        if steps:
            w = steps / total
            B += w * st.B
            B_avg += w * st.B_avg
    t = state.t + max(int(r[1]) for r in results)
    return SGDState(B.astype(state.B.dtype), B_avg, t), total, loss_sum


def auto_step_size(C_theta: np.ndarray, lam: float, *, subsample: bool = False) -> float:
    """A stable DSGD step η₀ (MATH.md §5).

    The Hessian of a step's objective is ``(1/b) Σ_i φ_X(x_i) φ_X(x_i)ᵀ ⊗ A_i + λ I`` with ``‖φ_X‖ = 1`` and
    ``A_i = Φ_Θ,Sᵀ Φ_Θ,S / |S|`` over the entries S used for curve i (the curve losses are ``½‖·‖² □ g``, so their
    curvature is at most the square loss's; the pinball losses have gradients bounded by 1 entrywise, so the steps
    stay bounded whatever their curvature: :mod:`rffor.solvers.dsgd`). For whole, fully observed curves
    ``A_i = C_Θ``, so ``η₀ = 0.99 / (‖C_Θ‖ + λ)`` is stable; for subsets (θ-subsampling) only
    ``‖A_i‖ ≤ max k_Θ(θ, θ) = 1`` holds, giving ``0.99 / (1 + λ)``.

    Curves with few observed values can have ``‖A_i‖`` up to ``min(1, ‖C_Θ‖ m / m_i)``; minibatch averaging keeps
    the first rule stable in practice (measured: batches of 8 curves with a single observed value each were
    stable at 3x this step; batches of 1 were not). A diverging run raises ``FloatingPointError``.

    Parameters
    ----------
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` on the grid (a 1-D array is its diagonal).
    lam : float
    subsample : bool, default False
        Whether steps use subsets of the locations (θ-subsampling of an integral loss).

    Returns
    -------
    float
    """
    C = np.asarray(C_theta, dtype=np.float64)
    norm = float(C.max()) if C.ndim == 1 else float(np.linalg.eigvalsh(C)[-1])
    return 0.99 / (1.0 + lam) if subsample else 0.99 / (min(norm, 1.0) + lam)
