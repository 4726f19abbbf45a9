"""The soft non-crossing penalty of thesis 003 Theorem 5.27 in the exact dual (MATH.md §6).

Problem (5.28) is (P) with a pinball loss plus

    Ω(h) = (λ_nc / (n m_nc)) Σ_i Σ_l (−∂_θ(b + h)(x_i)(θ̃_l))₊

at anchor levels θ̃_1 … θ̃_m_nc and the training inputs x_i (b is a fixed offset curve, b' its derivative; 0 without
one). It reads h through the linear functionals ``h ↦ ∂_θ h(x_i)(θ̃_l) = <h, k_X(·, x_i) ∂_2k_Θ(·, θ̃_l)>`` (k_Θ ∈
C², thesis (5.27)), which share the input kernel with the evaluations at (x_i, θ_j). Fenchel duality over all
n(m + m_nc) functionals, each dual variable scaled by nm as in (D_s), keeps the shape of (D_s)/(D_q) with a larger
output Gram matrix::

    F(Ā) = −<Ā, Ȳ> + (1/(2λnm)) Tr(K_X Ā K̄ Āᵀ) + Σ_ij ℓ_θj*(A_ij) + Σ_il ι_[0, β](B_il),    Ā = [A, B]

    K̄ = [[K_Θ(θ, θ),  ∂₂K(θ, θ̃)], [∂₂K(θ, θ̃)ᵀ, ∂₁∂₂K(θ̃, θ̃)]],   Ȳ = [Y, −b'(θ̃)],   β = λ_nc m / m_nc

(the penalty term ``f(r) = (λ_nc/(n m_nc)) r₊`` of ``r = −b'(θ̃_l) − ∂_θh(x_i)(θ̃_l)`` has the conjugate
ι_[0, λ_nc/(n m_nc)], times nm). The model is thesis (5.29)::

    h(x)(θ) = (1/(λnm)) Σ_i k_X(x, x_i) [Σ_j A_ij k_Θ(θ_j, θ) + Σ_l B_il ∂₂k_Θ(θ, θ̃_l)]

The derivative functionals are normalised to the norm of the evaluations, ``σ ∂₂k_Θ(·, θ̃)`` with
``σ = 1/sqrt(∂₁∂₂k_Θ(θ, θ))`` (1/sqrt(2γ) for a Gaussian k_Θ): the same problem (B, Ȳ's last columns and β scale
by σ, σ and 1/σ), but the diagonal of K̄ is then constant, which ADMM's entrywise splitting needs: measured on the
sine toy (n = 400, m = m_nc = 20, λ_nc = 10, γ = 10), 1,197 iterations instead of 5,839 to a gap of 1e-5.

:class:`NonCrossingLoss` gives the solvers the per-curve primal value (loss plus penalty), the box and its
projection, so that ADMM's eigen-solves, APGD and the certificate ``P + F/(nm)`` run unchanged on K̄ (the gap then
certifies problem (5.28), penalty included). By exact-penalty theory (an ℓ1 penalty), a λ_nc larger than the
multipliers of the hard constraint ``∂_θ(b + h) ≥ 0`` at the anchors gives a model that satisfies it exactly there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..kernels import Kernel
from ..losses import Loss, _observed, _safe_div, loss_from_spec, register_loss
from .dual import DualProblem

__all__ = [
    "NonCrossingLoss",
    "augmented_gram",
    "derivative_scale",
    "output_columns",
    "output_derivative_columns",
    "noncrossing_problem",
]


def derivative_scale(kernel: Kernel) -> float:
    """σ = 1/sqrt(∂₁∂₂k_Θ(θ, θ)), the normalisation of the derivative functionals (module docstring)."""
    _, d12 = kernel.gram_derivatives(np.zeros(1), np.zeros(1))
    return 1.0 / float(np.sqrt(d12[0, 0]))


def augmented_gram(kernel: Kernel, levels: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """K̄ of shape (m + m_nc, m + m_nc): the Gram matrix of the evaluations at the levels and the (normalised)
    derivatives at the anchors (module docstring)."""
    K = kernel.gram(levels)
    if len(anchors) == 0:
        return K
    sigma = derivative_scale(kernel)
    d2, _ = kernel.gram_derivatives(levels, anchors)
    _, d12 = kernel.gram_derivatives(anchors, anchors)
    return np.block([[K, sigma * d2], [sigma * d2.T, sigma**2 * d12]])


def output_columns(kernel: Kernel, levels: np.ndarray, anchors: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """G(θ) of shape (m + m_nc, q) with ``h(x)(θ) = (1/(λnm)) K_X(x, X) Ā G(θ)`` (thesis (5.29)): rows
    ``k_Θ(θ_j, θ)`` then ``σ ∂₂k_Θ(θ, θ̃_l)``."""
    K = kernel.gram(levels, theta)
    if len(anchors) == 0:
        return K
    d2, _ = kernel.gram_derivatives(theta, anchors)
    return np.vstack([K, derivative_scale(kernel) * d2.T])


def output_derivative_columns(kernel: Kernel, levels: np.ndarray, anchors: np.ndarray, theta: np.ndarray):
    """∂_θ G(θ), shape (m + m_nc, q): rows ``∂₂k_Θ(θ_j, θ)`` then ``σ ∂₁∂₂k_Θ(θ, θ̃_l)``; ``∂_θ h(x)(θ) =
    (1/(λnm)) K_X(x, X) Ā ∂_θG(θ)``."""
    d2, _ = kernel.gram_derivatives(levels, theta)
    if len(anchors) == 0:
        return d2
    _, d12 = kernel.gram_derivatives(theta, anchors)
    return np.vstack([d2, derivative_scale(kernel) * d12.T])


@dataclass(frozen=True)
class NonCrossingLoss(Loss):
    """A pinball loss on the first ``m`` columns and the non-crossing penalty on the others (module docstring).

    The residuals of the penalty's columns are ``r = σ(−b'(θ̃_l) − ∂_θh(x_i)(θ̃_l))`` (normalised functionals);
    a curve's value is ``L(r_{i, :m}) + (λ_nc/(σ m_nc)) Σ_l (r_il)₊`` (so that ``(1/n) Σ_i`` of it is the loss plus
    Ω), and the dual variables of those columns live in ``[0, λ_nc m/(σ m_nc)]``. ``theta`` is the levels followed
    by the anchors.

    Parameters
    ----------
    base : Loss
        A loss with ``dual_quadratic == 0`` (the pinball losses).
    lam_nc : float
        λ_nc ≥ 0.
    m : int
        Number of levels (the loss's columns).
    scale : float, default 1
        σ of the derivative functionals.
    """

    base: Loss | None = None
    lam_nc: float = 0.0
    m: int = 0
    scale: float = 1.0

    def __post_init__(self) -> None:
        if isinstance(self.base, dict):  # from a spec (loss_from_spec)
            object.__setattr__(self, "base", loss_from_spec(self.base))
        if not isinstance(self.base, Loss) or self.base.dual_quadratic != 0:
            raise ValueError(f"the non-crossing penalty applies to the pinball losses, got {self.base!r}")
        object.__setattr__(self, "dual_quadratic", 0.0)
        object.__setattr__(self, "needs_levels", self.base.needs_levels)

    def _split(self, X: np.ndarray, theta) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, float]:
        X = np.asarray(X)
        n_nc = X.shape[1] - self.m
        if n_nc < 1:
            raise ValueError(f"expected more than m={self.m} columns (levels, then anchors), got {X.shape[1]}")
        levels = None if theta is None else np.asarray(theta)[: self.m]
        return X[:, : self.m], X[:, self.m :], levels, self.weight * self.m / n_nc

    @property
    def weight(self) -> float:
        """λ_nc/σ: the penalty's slope in the normalised residuals."""
        return self.lam_nc / self.scale

    def curve_values(self, R, theta=None):
        R_loss, R_nc, levels, _ = self._split(R, theta)
        P0, mask, counts = _observed(R_nc)
        # each curve's penalty averaged over its observed anchors, as grad averages it
        penalty = _safe_div((np.maximum(P0, 0) * mask).sum(axis=1, keepdims=True), counts)[:, 0]
        return self.base.curve_values(R_loss, levels) + self.weight * penalty

    def grad(self, R, theta=None):
        R_loss, R_nc, levels, _ = self._split(R, theta)
        P0, mask, counts = _observed(R_nc)
        G_nc = _safe_div(self.weight * (P0 > 0) * mask, counts).astype(P0.dtype, copy=False)
        return np.hstack([self.base.grad(R_loss, levels), G_nc])

    def dual_penalty(self, A, theta=None):
        A_loss, B, levels, upper = self._split(A, theta)
        if np.any(B < -1e-10) or np.any(B > upper + 1e-10):
            return math.inf
        return self.base.dual_penalty(A_loss, levels)

    def prox_dual(self, U, step, theta=None):
        U_loss, U_nc, levels, upper = self._split(U, theta)
        return np.hstack([self.base.prox_dual(U_loss, step, levels), np.clip(U_nc, 0.0, upper)])

    def to_spec(self):
        spec = {"name": "noncrossing", "base": self.base.to_spec(), "lam_nc": self.lam_nc, "m": self.m}
        return {**spec, "scale": self.scale}


register_loss("noncrossing", NonCrossingLoss)


def noncrossing_problem(
    K_x: np.ndarray,
    Y: np.ndarray,
    levels: np.ndarray,
    kernel_theta: Kernel,
    lam: float,
    loss: Loss,
    *,
    lam_nc: float = 0.0,
    anchors: np.ndarray | None = None,
    offset_slope: np.ndarray | None = None,
    eig_x=None,
) -> DualProblem:
    """The exact dual of a quantile fit on a level grid, with the non-crossing penalty when ``lam_nc > 0``.

    Parameters
    ----------
    K_x : ndarray of shape (n, n)
    Y : ndarray of shape (n, m)
        Targets on the level grid (``y_i − b(θ_j)`` with an offset b).
    levels : ndarray of shape (m,)
        The level grid θ.
    kernel_theta : Kernel
        k_Θ (C² when ``lam_nc > 0``).
    lam : float
    loss : Loss
        A pinball loss (``needs_levels``).
    lam_nc : float, default 0
        λ_nc; 0 gives (D_q) on the levels alone.
    anchors : ndarray of shape (m_nc,), optional
        Anchor levels θ̃ (default: the levels).
    offset_slope : ndarray of shape (m_nc,), optional
        b'(θ̃) (default 0).
    eig_x : tuple (s, U), optional
        Eigendecomposition of K_x, if already computed.

    Returns
    -------
    DualProblem
        Its ``theta`` is the levels then the anchors; its output Gram matrix is K̄ (module docstring).
    """
    levels = np.asarray(levels, dtype=np.float64)
    if lam_nc == 0:
        return DualProblem.splines(K_x, kernel_theta.gram(levels), Y, lam, loss, eig_x=eig_x, theta=levels)
    anchors = levels if anchors is None else np.asarray(anchors, dtype=np.float64)
    slope = np.zeros(len(anchors)) if offset_slope is None else np.asarray(offset_slope, dtype=np.float64)
    n, m = Y.shape
    sigma = derivative_scale(kernel_theta)
    Y_aug = np.hstack([Y, np.broadcast_to(-sigma * slope, (n, len(anchors)))])
    return DualProblem.splines(
        K_x,
        augmented_gram(kernel_theta, levels, anchors),
        Y_aug,
        lam,
        NonCrossingLoss(loss, float(lam_nc), m, sigma),
        eig_x=eig_x,
        theta=np.concatenate([levels, anchors]),
        m=m,
    )
