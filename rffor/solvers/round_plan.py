"""The plan of DSGD rounds with periodic averaging (MATH.md §5): what every partition task of every round reads
(:class:`RoundPlan`, shared once per fit), the task itself (:func:`round_task`: K local steps of
:func:`rffor.solvers.dsgd.partition_steps`, seeded by ``(random_state, round, partition)``), the average of the
partitions' states (:func:`average_states`) and a stable step size (:func:`auto_step_size`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .dsgd import SGDConfig, SGDState, partition_steps

__all__ = ["RoundPlan", "round_task", "average_states", "auto_step_size"]


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
    """

    round_steps: list[int]
    config: SGDConfig
    input_features: Any
    Phi_theta: np.ndarray
    random_state: int
    n_partitions: int = 1

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


def round_task(part, p: int, chunk_ids, plan: RoundPlan, state: SGDState, round: int):
    """A task of a round (:meth:`executor session.map`): partition p's local steps; returns (SGDState, steps,
    loss_sum)."""
    return plan.run_partition(part, p, chunk_ids, state, round)


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
