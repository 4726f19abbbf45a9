"""The result of a random-feature fit: the model ``h(x)(θ) = φ_X(x)ᵀ B φ_Θ(θ)`` (MATH.md §5) and how it was
found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..kernels import Kernel
from ..losses import Loss
from .prediction import predict

__all__ = ["RFFResult"]


@dataclass
class RFFResult:
    """A fitted random-feature model ``h(x)(θ) = φ_X(x)ᵀ B φ_Θ(θ)`` (MATH.md §5).

    Attributes
    ----------
    coef : ndarray of shape (D_x, D_θ)
        B (the Polyak–Ruppert average for DSGD), in the fit's dtype.
    input_features : feature map
    output_features : ExactOutputFactor or RandomOutputFeatures
    theta : ndarray of shape (m,)
        Training grid.
    n_iter : int
        DSGD steps per partition (the global counter t; 0 for the closed form alone).
    history : list of dict
        One record per round (``round``, ``t``, ``steps``, ``loss`` (mean minibatch loss), ``objective``
        (``loss + (λ/2)‖B_avg‖²``, an estimate of J), ``seconds``, ``samples_per_s``), after a record
        ``round = -1`` for the square-loss closed form.
    method : str
        "closed_form", or "sgd" (DSGD, possibly from the closed form).
    random_state : int
        The seed every random draw came from.
    n_partitions : int
        P.
    state : dict of str to ndarray or None
        The route's final state as plain arrays (what a checkpoint stores: DSGD ``B``, ``B_avg``, ``t``; MM ``B``,
        ``B_prev``).
    plan : RoundPlan or None
        DSGD: the plan of the rounds.
    warm_coef : ndarray of shape (D_x, D_θ) or None
        MM: the warm start B (the square-loss closed form, or with ``lam="auto"`` the selected path model), to
        compare with the final model.
    lam : float or None
        The λ of the model (the selected one with ``lam="auto"``).
    loss : Loss or None
        The loss of the model (with the selected κ or ε with ``loss_params``).
    kernel_x : Kernel or None
        k_X (the median heuristic's when ``fit_rff`` got None).
    kernel_theta : Kernel or None
        k_Θ of the model (the selected one with ``kernel_theta_params``).
    path : Selection or None
        ``lam="auto"``: what the selection evaluated (:mod:`rffor.solvers.selection`): candidates, held-out scores,
        walks.
    """

    coef: np.ndarray
    input_features: Any
    output_features: Any
    theta: np.ndarray
    n_iter: int
    history: list[dict]
    method: str
    random_state: int
    n_partitions: int = 1
    state: dict | None = field(default=None, repr=False)
    plan: Any = field(default=None, repr=False)
    warm_coef: np.ndarray | None = field(default=None, repr=False)
    lam: float | None = None
    loss: Loss | None = None
    kernel_x: Kernel | None = None
    kernel_theta: Kernel | None = None
    path: Any = field(default=None, repr=False)

    @property
    def objective_history(self) -> np.ndarray:
        """Objective (estimate) per record of ``history``."""
        return np.array([h["objective"] for h in self.history], dtype=np.float64)

    def predict(self, X: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Curves at inputs X (n, d), on the training grid or at ``theta`` (q,); returns (n, m) or (n, q)."""
        grid = self.theta if theta is None else theta
        return predict(self.coef, self.input_features, self.output_features.transform(grid), np.asarray(X))

    @classmethod
    def of(cls, problem, coef: np.ndarray, *, history: list[dict], method: str, n_partitions: int, **kw) -> RFFResult:
        """The result of a route on ``problem`` (an :class:`~rffor.solvers.problem.RFProblem`): B in the fit's
        dtype, the problem's maps, grid, λ, loss and kernels."""
        return cls(
            coef=np.asarray(coef).astype(problem.dtype),
            input_features=problem.input_features,
            output_features=problem.output.features,
            theta=np.asarray(problem.space.grid, dtype=np.float64),
            history=history,
            method=method,
            random_state=problem.random_state,
            n_partitions=n_partitions,
            lam=problem.lam,
            loss=problem.loss,
            kernel_x=problem.kernel_x,
            kernel_theta=problem.output.kernel,
            **kw,
        )
