"""The Welsch loss: a redescending curve loss for the random-feature path (no exact dual).

Every loss of the seed papers is convex (``½‖·‖² □ g``, MATH.md §2), so its influence is bounded but never zero: an
outlier curve pulls the fit with a force that does not fall as the outlier goes away. When the outliers do not
depend on x (Type 2, MATH.md §7) they pull every h(x) toward their centre by an amount no number of curves removes
(the *contamination floor* of ``benchmarks/learning_curve.py``). A redescending loss gives far curves a vanishing
pull. The Welsch (Leclerc) loss of the μ_m curve norm ``‖r‖ = ((1/m_i) Σ_j r_j²)^½`` (observed entries only, as
H_κ^2) is

    L_κ(r) = (κ²/2) (1 − exp(−‖r‖²/κ²)),      ∇L_κ(r)_j = exp(−‖r‖²/κ²) r_j / m_i.                       (W)

- As κ → ∞ it is the square loss ½‖r‖²; below ‖r‖ ≈ κ it is quadratic, far beyond it it is flat (value κ²/2,
  gradient → 0).
- Its gradient is 1-Lipschitz in the μ_m norm: the Hessian ``e^{−s} (I − 2 r rᵀ/κ²)/m_i`` (s = ‖r‖²/κ²) has
  eigenvalues in ``[−2e^{−3/2}, 1]/m_i``, so the square loss's Hessian majorises it, as for the convex curve losses,
  and the MM passes of :mod:`rffor.solvers.mm` apply unchanged (they decrease J monotonically, to a stationary
  point: J is not convex).
- ``L_κ`` is a concave function of ‖r‖², so its tangent in ‖r‖² is a majoriser touching it at r₀:
  ``L_κ(r) ≤ L_κ(r₀) + ½ w (‖r‖² − ‖r₀‖²)`` with ``w = exp(−‖r₀‖²/κ²)``; reweighted closed forms with these
  weights (iteratively reweighted least squares, :mod:`rffor.solvers.warm_start`) never increase the objective.

Not convex, so there is no dual, no duality gap and no certificate: the exact solvers refuse it
(:attr:`~rffor.losses.Loss.has_dual` is False) and ``solver="auto"`` fits it with random features. A fit reaches a
stationary point that depends on its start: the MM route starts from the square loss's closed form (DSGD from the
reweighted closed forms above), and the κ walk of ``loss_params="auto"`` warm-starts each κ from its neighbour.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._validation import check_real
from .losses import KappaScaled, Loss, _observed, _safe_div, register_loss

__all__ = ["Welsch"]


@dataclass(frozen=True)
class Welsch(KappaScaled, Loss):
    """Welsch loss of the curve norm, (W) above: redescending, robust to outlier curves at any distance.

    Parameters
    ----------
    kappa : float > 0, default=1.0
        Scale of the loss in the units of the outputs (μ_m norm, as Huber's κ): curves whose residual norm is
        well below κ are fitted as by the square loss, curves far beyond it are ignored. ``inf`` gives the square
        loss. ``loss_params="auto"`` chooses it on held-out curves.
    """

    kappa: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", check_real(self.kappa, "kappa", low=0, low_open=True, allow_inf=True))
        object.__setattr__(self, "has_dual", False)

    def param_floor(self, scale: float) -> float:
        """``scale`` itself: below the typical residual norm the weights ``exp(−‖r‖²/κ²)`` of most curves vanish
        together, the loss is flat around the model and its MM passes stall (their majoriser has the square loss's
        curvature, the loss e^{−‖r‖²/κ²} of it); a selection would compare copies of its warm start."""
        return float(scale)

    def _sq_norms(self, R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Residuals with NaN as 0, the per-curve counts (n, 1) and the squared μ_m norms ‖r_i‖² (n, 1)."""
        R0, _, counts = _observed(R)
        return R0, counts, _safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts)

    def _weights(self, sq: np.ndarray) -> np.ndarray:
        """``exp(−‖r‖²/κ²)`` (1 for κ = ∞)."""
        return np.exp(-sq / self.kappa**2) if not math.isinf(self.kappa) else np.ones_like(sq)

    def curve_values(self, R, theta=None):
        _, _, sq = self._sq_norms(R)
        if math.isinf(self.kappa):
            return 0.5 * sq[:, 0]
        # −expm1 keeps the quadratic region exact (1 − e^{−s} loses digits for small s)
        return (-0.5 * self.kappa**2 * np.expm1(-sq / self.kappa**2))[:, 0]

    def grad(self, R, theta=None):
        R0, counts, sq = self._sq_norms(R)
        return _safe_div(R0, counts) * self._weights(sq).astype(R0.dtype, copy=False)

    def irls_weights(self, R):
        """``w_i = exp(−‖r_i‖²/κ²)``: the weighted square loss ``Σ_i w_i ½‖r_i‖²`` majorises (W) up to a constant
        and touches it at R (module docstring); None for κ = ∞ (the square loss). Shapes as
        :meth:`rffor.losses.Loss.irls_weights`: R (n, m) with NaN unobserved, w (n,)."""
        if math.isinf(self.kappa):
            return None
        _, _, sq = self._sq_norms(R)
        return self._weights(sq)[:, 0]

    def _no_dual(self):
        raise ValueError(
            f"{self!r} is not convex: it has no dual, so the exact solvers (admm, apgd) cannot fit it; use "
            "solver='rff' (or 'auto')"
        )

    def dual_penalty(self, A, theta=None):
        self._no_dual()

    def prox_dual(self, U, step, theta=None):
        self._no_dual()

    def to_spec(self):
        return {"name": "welsch", "kappa": self.kappa}


register_loss("welsch", Welsch)
