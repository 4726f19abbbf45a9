"""The dual problem of the exact solver, shared by APGD and ADMM (MATH.md §3.1, §3.2).

Both representations have the same shape::

    F(A) = (q/2)‖A‖_F² − <A, Y>_F + (c/2) <A, 𝒦(A)>_F + Σ_i ψ(a_i),      𝒦(A) = K_X A K_out

with q = ``loss.dual_quadratic``: 1 for the losses ``½‖·‖² □ g`` (D_s), 0 for the pinball losses, whose dual (D_q)
is a box-constrained quadratic (:mod:`rffor.losses`, module docstring). Losses that depend on the location of each
residual (``loss.needs_levels``) receive the grid ``theta``.

- splines (D_s): A, Y of shape (n, m), ``K_out = K_Θ``, ``c = 1/(λnm)``, ψ = ``loss.dual_penalty``;
- eigenbasis (D_e): A, Y of shape (n, r) with Y the coefficients ``Y V_r/√m``, ``K_out = Δ = diag(t_r/m)``,
  ``c = 1/(λn)``, ψ = ``loss.dual_penalty_eigen``.

The primal value of a dual iterate is ``P(A) = (1/n) Σ_i L(y_i − c 𝒦(A)_i) + (λ/2) c <A, 𝒦(A)>`` and the
duality gap ``P(A) + F(A)/scale ≥ 0`` with ``scale = nm`` (splines) or ``n`` (eigen) vanishes at the optimum.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._linalg import eigh_psd, inner
from ..losses import Loss

__all__ = ["DualProblem", "SolverResult", "full_certificate"]


@dataclass
class DualProblem:
    """(D_s) or (D_e) with everything the solvers reuse across iterations.

    Attributes
    ----------
    K_x : ndarray (n, n)
        Input Gram matrix K_X.
    s, U : ndarrays (n,), (n, n)
        Eigendecomposition of K_X.
    t : ndarray (q,)
        Eigenvalues of the output operator (K_Θ for splines, q = m; δ for eigen, q = r).
    V : ndarray (q, q) or None
        Eigenvectors of K_Θ (splines); None for eigen, whose output operator is already diagonal.
    K_out : ndarray (q, q) or None
        K_Θ (splines) or None (eigen: ``𝒦(A) = K_X (A * t)``).
    Y : ndarray (n, q)
        Dual target: outputs on the grid (splines) or their eigen-coefficients (eigen).
    c : float
        Scale of the quadratic term.
    lam : float
    loss : Loss
    eigen : bool
    V_r, t_r : ndarrays (m, r), (r,) or None
        Eigen only: kept eigenpairs of K_Θ, for Nyström predictions off the grid.
    Y_grid : ndarray (n, m) or None
        Eigen only: the outputs on the grid (for :func:`full_certificate`).
    theta : ndarray (q,) or None
        Splines: the locations of the columns, passed to the loss (the quantile levels of a pinball loss).
    m_loss : int or None
        Splines: the m of ``c = 1/(λnm)`` and of the gap (None: q, the columns of Y).
    """

    K_x: np.ndarray
    s: np.ndarray
    U: np.ndarray
    t: np.ndarray
    V: np.ndarray | None
    K_out: np.ndarray | None
    Y: np.ndarray
    c: float
    lam: float
    loss: Loss
    eigen: bool = False
    #: eigen only: the kept eigenvectors (m, r) and eigenvalues (r,) of K_Θ, for Nyström predictions
    V_r: np.ndarray | None = None
    t_r: np.ndarray | None = None
    #: eigen only: the outputs on the grid (n, m), for the certificate of (P) (:func:`full_certificate`)
    Y_grid: np.ndarray | None = None
    #: splines: the grid, for losses with ``needs_levels``
    theta: np.ndarray | None = None
    #: splines: the number m of grid locations the loss averages over (c = 1/(λnm)); None: the columns of Y
    m_loss: int | None = None

    def __post_init__(self) -> None:
        # c folded into the output factor once, so that the kernel product is just the two matrix products
        if not self.loss.has_dual:
            raise ValueError(f"{self.loss!r} is not convex: it has no dual (D_s)/(D_e); fit it with solver='rff'")
        self._out_c = self.c * (self.t if self.eigen else self.K_out)
        self.q = float(self.loss.dual_quadratic)

    # ------------------------------------------------------------ builders
    @classmethod
    def splines(cls, K_x, K_theta, Y, lam, loss, *, eig_x=None, eig_theta=None, theta=None, m=None) -> DualProblem:
        """(D_s) (or (D_q) for a pinball loss) from K_X (n, n), K_Θ (q, q) and Y (n, q) with no NaN.

        ``theta`` (q,) is the grid, needed by losses with ``needs_levels``; ``m`` is the number of grid locations
        the loss averages over (default q). A problem with more columns than that (the non-crossing penalty's
        derivative functionals, :mod:`rffor.solvers.noncrossing`) keeps ``c = 1/(λnm)`` and the gap's ``nm``.
        """
        n, q = Y.shape
        m = q if m is None else int(m)
        if loss.needs_levels and theta is None:
            raise ValueError(f"{loss!r} needs the grid theta (the quantile levels)")
        s, U = eig_x if eig_x is not None else eigh_psd(K_x)
        t, V = eig_theta if eig_theta is not None else eigh_psd(K_theta)
        Y = np.asarray(Y, dtype=np.float64)
        return cls(K_x, s, U, t, V, K_theta, Y, 1.0 / (lam * n * m), lam, loss, theta=theta, m_loss=m)

    @classmethod
    def eigenbasis(cls, K_x, K_theta, Y, lam, loss, n_eig, *, eig_x=None, eig_theta=None) -> DualProblem:
        """(D_e) keeping the ``n_eig`` largest eigenpairs of K_Θ (MATH.md §3.2)."""
        if not loss.supports_eigen:
            raise ValueError(f"{loss!r} has no eigenbasis dual (D_e); use representation='splines'")
        n, m = Y.shape
        s, U = eig_x if eig_x is not None else eigh_psd(K_x)
        tt, VV = eig_theta if eig_theta is not None else eigh_psd(K_theta)
        V_r = VV[:, :n_eig]
        delta = tt[:n_eig] / m
        Y = np.asarray(Y, dtype=np.float64)
        R = (Y @ V_r) / math.sqrt(m)
        return cls(
            K_x, s, U, delta, None, None, R, 1.0 / (lam * n), lam, loss, eigen=True, V_r=V_r, t_r=tt[:n_eig], Y_grid=Y
        )

    @classmethod
    def structured(cls, K_x, V, lam, loss, *, eig_x=None) -> DualProblem:
        """(D_e) of structured outputs (MATH.md §8): ``Y := V`` with ``K_Y = V Vᵀ`` (r columns), t = 1, c = 1/(λn).

        This is seed 002's (D1)/(D2) (and (D3) for the ε-SVR loss, q = 0) with W = A, λ its Λ and the loss's κ, ε
        its κ, ε in the norm of the output RKHS: the rows of V are isometric coordinates of the ψ(y_i), so the
        residual norms of :meth:`primal_value` (the √r rescaling of the μ_r norm) are the RKHS norms. V may also be
        an explicit embedding Ψ (an isometric image too), e.g. with missing entries masked by the loss.
        """
        if not loss.supports_eigen:
            loss.prox_dual_eigen(np.zeros((1, 1)), 1.0)  # raises the loss's own explanation
        V = np.asarray(V, dtype=np.float64)
        n, r = V.shape
        s, U = eig_x if eig_x is not None else eigh_psd(K_x)
        return cls(K_x, s, U, np.ones(r), None, None, V, 1.0 / (lam * n), lam, loss, eigen=True)

    # ------------------------------------------------------------ operators
    @property
    def n(self) -> int:
        return self.Y.shape[0]

    @property
    def lipschitz(self) -> float:
        """L = q + c ‖K_X‖₂ ‖K_out‖₂ (MATH.md §3.1); the smooth part is q-strongly convex."""
        return self.q + self.c * float(self.s[0]) * float(np.max(self.t))

    @property
    def gap_scale(self) -> float:
        """The factor between F and the dual objective of (P): nm (splines) or n (eigen)."""
        if self.eigen:
            return float(self.n)
        return float(self.n * (self.Y.shape[1] if self.m_loss is None else self.m_loss))

    def kernel_product(self, A: np.ndarray) -> np.ndarray:
        """``c 𝒦(A)``: the predictions on the grid (splines) or their coefficients (eigen). One product."""
        if self.eigen:
            return self.K_x @ (A * self._out_c)
        return (self.K_x @ A) @ self._out_c

    def rotate(self, A: np.ndarray) -> np.ndarray:
        """Coordinates in the joint eigenbasis: ``Uᵀ A V``."""
        UA = self.U.T @ A
        return UA if self.eigen else UA @ self.V

    def unrotate(self, A_hat: np.ndarray) -> np.ndarray:
        """Inverse of :meth:`rotate`: ``U Â Vᵀ``."""
        UA = self.U @ A_hat
        return UA if self.eigen else UA @ self.V.T

    @property
    def hessian_diag(self) -> np.ndarray:
        """Diagonal of the Hessian of the smooth part in the joint eigenbasis, ``q + c s tᵀ``, shape (n, q)."""
        return self.q + self.c * np.outer(self.s, self.t)

    def prox(self, U: np.ndarray, step: float) -> np.ndarray:
        if self.eigen:
            return self.loss.prox_dual_eigen(U, step)
        return self.loss.prox_dual(U, step, theta=self.theta)

    def penalty(self, A: np.ndarray) -> float:
        return self.loss.dual_penalty_eigen(A) if self.eigen else self.loss.dual_penalty(A, theta=self.theta)

    # ------------------------------------------------------------ solutions
    def prediction_weights(self, A: np.ndarray) -> np.ndarray:
        """The weights W of the model of dual coefficients A: predictions are ``K_X(X_new, X) W K_Θ(grid, θ_new)``
        (MATH.md §3.1, §3.2).

        Splines: ``W = c A = A / (λnm)``, shape (n, q) (q = m, or m plus the non-crossing penalty's derivative
        columns); eigen, with the Nyström eigenfunctions ψ_j: ``W = A V_rᵀ / (λ n √m)``, shape (n, m).
        """
        if self.eigen:
            m = self.Y_grid.shape[1]
            return A @ self.V_r.T / (self.lam * self.n * np.sqrt(m))
        return A * self.c

    def closed_form(self) -> np.ndarray:
        """Square-loss solution (Sylvester equation solved in the eigenbases), the warm start of the others:
        ``A = U [ (Uᵀ Y V) ⊘ (1 + c s tᵀ) ] Vᵀ`` (MATH.md §3.1, and its (D_e) analogue). Its rows are the
        square-loss residuals, so for a pinball loss their projection on the box is the sign pattern of a fit.
        """
        from .closed_form import diagonal_sylvester

        return diagonal_sylvester(self.U, self.s, self.V, self.t, self.Y, shift=1.0, scale=self.c)

    # ------------------------------------------------------------ certificates
    def dual_value(self, A: np.ndarray, KA: np.ndarray, *, aKa: float | None = None) -> float:
        """F(A) given ``KA = c 𝒦(A)`` (and optionally ``aKa = <A, KA>``)."""
        if aKa is None:
            aKa = inner(A, KA)
        quad = 0.5 * self.q * inner(A, A) if self.q else 0.0
        return quad - inner(A, self.Y) + 0.5 * aKa + self.penalty(A)

    def primal_value(self, A: np.ndarray, KA: np.ndarray, *, aKa: float | None = None) -> float:
        """P of the primal model built from the dual iterate A (MATH.md §3.1 "Primal value of a dual iterate")."""
        if aKa is None:
            aKa = inner(A, KA)
        R = self.Y - KA
        if self.eigen:
            # coefficients in an orthonormal basis of 𝒴: their Euclidean norm is the μ_m norm of the curve,
            # and curve_values averages over r columns, hence the √r
            R *= math.sqrt(R.shape[1])
        reg = 0.5 * self.lam * aKa * self.c
        return self.loss.value(R, theta=self.theta) + reg

    def certificate(self, A: np.ndarray, KA: np.ndarray) -> tuple[float, float, float]:
        """(primal, dual, relative gap) at a feasible A; the dual is ``−F(A)/scale`` so that primal ≥ dual."""
        aKa = inner(A, KA)
        primal = self.primal_value(A, KA, aKa=aKa)
        dual = -self.dual_value(A, KA, aKa=aKa) / self.gap_scale
        gap = primal - dual
        denom = max(abs(primal), abs(dual), np.finfo(float).tiny)
        return primal, dual, gap / denom


def full_certificate(eigen: DualProblem, A: np.ndarray, K_theta: np.ndarray) -> tuple[float, float, float]:
    """(P)'s certificate for the model of an eigenbasis solution A of (D_e) with r ≤ m (MATH.md §3.2).

    (D_e) keeps r eigenpairs of K_Θ, so its own gap certifies the reduced problem, not (P). The model it returns,
    ``h = Σ_i k_X(·, x_i) W_i K_Θ`` with ``W = A V_rᵀ/(λn√m)``, is the splines model of ``A_s = √m A V_rᵀ``
    (``c_s K_X A_s K_Θ = K_X W K_Θ`` with ``c_s = 1/(λnm)``), whose rows have the norms of A's rows scaled by
    √m: a feasible point of (D_s) for every loss with an eigenbasis dual (their constraint sets are balls, of radius
    κ in (D_e) and √m κ in (D_s)). So ``P(h) − (−F_s(A_s)/(nm))`` is a duality gap of (P) at h: it bounds
    ``P(h) − P*``, the reduction's error included. (A_s is projected on (D_s)'s feasible set first, in case of
    rounding; the primal value is that of h itself.)

    Parameters
    ----------
    eigen : DualProblem
        The (D_e) problem (``eigen.eigen`` is True).
    A : ndarray of shape (n, r)
        Its solution.
    K_theta : ndarray of shape (m, m)
        The output Gram matrix on the grid.

    Returns
    -------
    primal : float
        P(h), the objective of (P) at the returned model.
    dual : float
        The dual bound (≤ P*).
    gap : float
        ``(primal − dual) / max(|primal|, |dual|)``.
    """
    m = eigen.V_r.shape[0]
    Y = _grid_targets(eigen)
    full = DualProblem.splines(eigen.K_x, K_theta, Y, eigen.lam, eigen.loss, eig_x=(eigen.s, eigen.U))
    A_s = math.sqrt(m) * (A @ eigen.V_r.T)
    primal = full.primal_value(A_s, full.kernel_product(A_s))
    A_f = full.prox(A_s, 0.0)
    dual = -full.dual_value(A_f, full.kernel_product(A_f)) / full.gap_scale
    return primal, dual, (primal - dual) / max(abs(primal), abs(dual), np.finfo(float).tiny)


def _grid_targets(eigen: DualProblem) -> np.ndarray:
    if eigen.Y_grid is None:
        raise ValueError("this eigenbasis problem does not keep its outputs on the grid")
    return eigen.Y_grid


@dataclass
class SolverResult:
    """What an exact solver returns.

    Attributes
    ----------
    coef : ndarray (n, q)
        The dual coefficients A (feasible).
    n_iter : int
    gap : float
        Relative duality gap at ``coef``.
    history : dict of lists
        ``primal``, ``dual`` and ``gap`` (relative) per iteration, the warm start first.
    converged : bool
    """

    coef: np.ndarray
    n_iter: int
    gap: float
    history: dict
    converged: bool


def new_history() -> dict:
    return {"primal": [], "dual": [], "gap": []}


def record(history: dict, cert: tuple[float, float, float]) -> float:
    primal, dual, gap = cert
    history["primal"].append(primal)
    history["dual"].append(dual)
    history["gap"].append(gap)
    return gap
