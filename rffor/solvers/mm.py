"""Full-batch majorize–minimize passes for the random-feature model (MATH.md §5, (P_rf)).

The curve losses are ``L = ½‖·‖² □ g`` (MATH.md §2), so their gradient is 1-Lipschitz in the μ_m norm and the
square loss's Hessian majorises them (for the κ-smoothed pinball, whose curvature reaches ``max(θ, 1 − θ)/κ``, the
metric doubling below restores the bound): for any B, B',

    J(B') ≤ J(B) + <∇J(B), B' − B> + ½ <B' − B, H (B' − B)>,     H = C_X ⊗ C_Θ + λ I               (MM)

with ``C_X = Φ_Xᵀ Φ_X / n`` and ``C_Θ = Φ_Θᵀ Φ_Θ / m`` (the Hessian of the square loss's J). Minimising the bound
gives the step ``B' = B − H⁻¹ ∇J(B)``: J decreases monotonically, and converges linearly to the optimum of (P_rf),
fast when most curves sit in the quadratic region of the loss (for H_κ^2 on data with 10% outliers, measured: a
relative excess objective of 1e-8 after 5 passes from the square-loss closed form, n = 10^5, λ down to 1e-13).
For the square loss H is the exact Hessian and one step from anywhere is the closed form.

- ``∇J(B) = −(1/n) Σ_i φ_X(x_i) ∇L(r_i)ᵀ Φ_Θ + λ B`` is a sum over rows: one pass, map-reduced by the executor
  (:func:`grad_task`, per row ``O(D_x (d + D_θ) + m D_θ)``: linear in the number of features);
- ``H⁻¹ V`` solves ``C_X X C_Θ + λ X = V`` in the eigenbases of C_X and C_Θ (:class:`SquareMetric`): the
  eigendecomposition of the closed form's C_X, made once per fit (no D_x³ step per pass), then ``O(D_x² D_θ)``.

When C_X comes from a sample of rows (not all of them), or the loss curves more than the square loss, the bound
may fail: :func:`mm_step` then rejects the step (J would increase) and doubles the metric (``c H``), which
costs no extra pass (the gradient at the current point is kept).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .._linalg import eigh_psd, inner
from ..executor import chunkwise
from ..losses import Loss
from .closed_form import rotated_sylvester

__all__ = [
    "GradSums",
    "grad_task",
    "curve_errors_task",
    "concat_errors",
    "SquareMetric",
    "mm_step",
    "MMRun",
    "mm_steps",
    "mm_minimize",
]

#: rows of a chunk whose features are computed at once
_BLOCK_ROWS = 4096


@dataclass
class GradSums:
    """Sums over rows at one B (``+`` adds two of them: the reduce step).

    Attributes
    ----------
    g : ndarray of shape (D_x, D_θ), or (K, D_x, D_θ) for K models at once, float64
        ``Σ_i φ_X(x_i) ∇L(r_i)ᵀ Φ_Θ`` (∇L per MATH.md §5's table, missing entries masked).
    loss : float, or ndarray of shape (K,)
        ``Σ_i L(r_i)``.
    n : int
        Rows summed.
    """

    g: np.ndarray
    loss: float = 0.0
    n: int = 0

    def __add__(self, other: GradSums) -> GradSums:
        return GradSums(self.g + other.g, self.loss + other.loss, self.n + other.n)

    def objective(self, B: np.ndarray, lam: float) -> float:
        """``J(B) = (1/n) Σ L(r_i) + (λ/2) ‖B‖²``."""
        return self.loss / self.n + 0.5 * lam * inner(B, B)

    def gradient(self, B: np.ndarray, lam: float) -> np.ndarray:
        """``∇J(B) = −g/n + λ B``."""
        return -self.g / self.n + lam * B


@chunkwise
def grad_task(part, p: int, chunk_ids: Sequence[int], maps, B: np.ndarray, loss: Loss) -> GradSums:
    """One partition's share of a gradient pass at B (a task of an executor session's ``reduce``).

    Features and predictions in the fit's dtype (float32 by default), the products accumulated in float64. The
    blocks are those of :meth:`FitMaps.basis_block <rffor.solvers.maps.FitMaps.basis_block>`: for Nyström features
    the kernel block ``k(X, C)`` against ``Wᵀ B``, the sums mapped back by W once per task (FALKON's
    parametrisation, MATH.md §5.1: ``φ_X(X) B = k(X, C) Wᵀ B``), so a pass skips the whitening's M² flops a row.

    Parameters
    ----------
    part : chunked dataset
        The partition's data.
    p : int
        Partition index (unused: the result does not depend on it).
    chunk_ids : sequence of int
    maps : FitMaps
        ``input_features`` (φ_X) and ``Phi_theta`` (Φ_Θ on the grid, shape (m, D_θ)).
    B : ndarray of shape (D_x, D_θ), or (K, D_x, D_θ)
        K models at once (a λ path): the features of each block are computed once for all of them.
    loss : Loss

    Returns
    -------
    GradSums
        With ``g`` of the shape of B and, for K models, ``loss`` of shape (K,).
    """
    if np.ndim(B) == 3:
        return _grad_sums_stacked(part, chunk_ids, maps, B, loss)
    dtype = maps.input_features.dtype
    Pt = np.ascontiguousarray(maps.Phi_theta, dtype=dtype)  # (m, D_θ)
    Bd = np.ascontiguousarray(maps.to_basis(B), dtype=dtype)  # B on the basis of the blocks (FitMaps.basis_block)
    theta = np.asarray(part.theta)  # the pinball losses read the levels
    out = GradSums(np.zeros(Bd.shape))
    for i, X_i, Y_i in part.iter_chunks([int(i) for i in chunk_ids]):
        Y_i = np.asarray(Y_i, dtype=dtype)
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            A = maps.basis_block(part, i, s, X_i[s : s + _BLOCK_ROWS])
            R = Y_i[s : s + _BLOCK_ROWS] - (A @ Bd) @ Pt.T  # NaN where unobserved: the losses mask them
            G = loss.grad(R, theta)
            out.loss += float(np.sum(loss.curve_values(R, theta), dtype=np.float64))
            out.g += A.T @ (G @ Pt)
            out.n += R.shape[0]
    out.g = maps.from_basis(out.g)
    return out


def _grad_sums_stacked(part, chunk_ids, maps, Bs: np.ndarray, loss: Loss) -> GradSums:
    dtype = maps.input_features.dtype
    Pt = np.ascontiguousarray(maps.Phi_theta, dtype=dtype)
    Bd = np.ascontiguousarray(maps.to_basis(Bs), dtype=dtype)  # (K, D_x, D_θ)
    K = Bd.shape[0]
    theta = np.asarray(part.theta)
    out = GradSums(np.zeros(Bd.shape), np.zeros(K))
    for i, X_i, Y_i in part.iter_chunks([int(i) for i in chunk_ids]):
        Y_i = np.asarray(Y_i, dtype=dtype)
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            A = maps.basis_block(part, i, s, X_i[s : s + _BLOCK_ROWS])
            Yb = Y_i[s : s + _BLOCK_ROWS]
            for k in range(K):  # a loop over models, not rows: each iteration is BLAS on the whole block
                R = Yb - (A @ Bd[k]) @ Pt.T
                out.loss[k] += float(np.sum(loss.curve_values(R, theta), dtype=np.float64))
                out.g[k] += A.T @ (loss.grad(R, theta) @ Pt)
            out.n += A.shape[0]
    out.g = maps.from_basis(out.g)
    return out


@chunkwise
def curve_errors_task(part, p: int, chunk_ids: Sequence[int], maps, Bs: np.ndarray) -> np.ndarray:
    """Per-curve mean squared errors of K models on one partition's rows (a task of a session's ``reduce`` with
    ``combine=``:func:`concat_errors`: the driver receives every row's errors, in row order).

    Parameters
    ----------
    part : chunked dataset
    p : int
        Partition index (unused).
    chunk_ids : sequence of int
    maps : FitMaps
    Bs : ndarray of shape (K, D_x, D_θ)

    Returns
    -------
    ndarray of shape (K, rows)
        :func:`rffor.metrics.curve_mse` of every model on every row of the chunks, in chunk order.
    """
    from ..metrics import curve_mse

    dtype = maps.input_features.dtype
    Pt = np.ascontiguousarray(maps.Phi_theta, dtype=dtype)
    Bd = np.ascontiguousarray(maps.to_basis(Bs), dtype=dtype)
    out = []
    for i, X_i, Y_i in part.iter_chunks([int(i) for i in chunk_ids]):
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            A = maps.basis_block(part, i, s, X_i[s : s + _BLOCK_ROWS])
            Yb = Y_i[s : s + _BLOCK_ROWS]
            out.append(np.stack([curve_mse(Yb, (A @ B) @ Pt.T) for B in Bd]) if len(Yb) else np.zeros((len(Bd), 0)))
    return np.concatenate(out, axis=1) if out else np.zeros((len(Bd), 0))


def concat_errors(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The merge of two partitions' :func:`curve_errors_task` results: their rows side by side, in order."""
    return np.concatenate([a, b], axis=1)


class SquareMetric:
    """``H_c = c C_X ⊗ C_Θ + λ I`` (the square loss's Hessian, scaled by c ≥ 1) and its inverse.

    Parameters
    ----------
    C_x : ndarray of shape (D_x, D_x)
        ``Φ_Xᵀ Φ_X / n`` (eigendecomposed once, here).
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` (1-D: diagonal, the exact output factor).
    lam : float
        λ > 0.
    """

    def __init__(self, C_x: np.ndarray, C_theta: np.ndarray, lam: float):
        self.a, self.U = eigh_psd(np.asarray(C_x, dtype=np.float64))
        self._set_output(C_theta)
        self.lam = float(lam)

    @classmethod
    def from_sums(cls, sums, C_theta: np.ndarray, lam: float) -> SquareMetric:
        """The metric of the rows of ``sums`` (:class:`~rffor.solvers.sums.FeatureSums`): the eigenpairs of
        ``C_X = RᵀR / n`` from the singular value decomposition of its factor, ``R = W diag(σ) Pᵀ``,
        ``a = σ² / n``, eigenvectors P: accurate down to the rounding of the largest σ, where ``eigh(RᵀR)`` would
        lose every eigenvalue below ``ε a_max``. Such a metric also gives the closed form (:meth:`closed_form`)."""
        out = object.__new__(cls)
        W, sigma, Pt = np.linalg.svd(np.asarray(sums.R, dtype=np.float64))
        out.a, out.U = sigma**2 / sums.n, np.ascontiguousarray(Pt.T)
        out._W, out._sigma = W, sigma
        out._set_output(C_theta)
        out.lam = float(lam)
        return out

    def closed_form(self, sums, m: int, lam: float | None = None) -> np.ndarray:
        """The square loss's minimiser of (P_rf), ``C_X B C_Θ + λ B = M`` (MATH.md §5), for the rows this metric
        was built from (:meth:`from_sums`), ``sums`` in its output factor (``Z`` of shape (D_x, D_θ)).

        The right-hand side is rotated as ``Pᵀ M = diag(σ) Wᵀ Z / (n m)``, never formed as ``RᵀZ / (n m)``: along a
        direction of small σ its value is of order σ², below the rounding of ``RᵀZ`` (ε σ_max ‖Z‖).

        Returns
        -------
        B : ndarray of shape (D_x, D_θ), float64
        """
        G_hat = (self._sigma[:, None] * (self._W.T @ np.asarray(sums.Z, dtype=np.float64))) / (sums.n * m)
        return self._solve_rotated(G_hat, 1.0, lam)

    def _set_output(self, C_theta: np.ndarray) -> None:
        C_theta = np.asarray(C_theta, dtype=np.float64)
        if C_theta.ndim == 1:
            self.t, self.V = C_theta, None
        else:
            self.t, self.V = eigh_psd(C_theta)

    def with_output(self, C_theta: np.ndarray) -> SquareMetric:
        """The metric of the same C_X (its eigendecomposition reused: no D_x³ step) with another C_Θ of shape
        (D_θ',) or (D_θ', D_θ') (another output kernel)."""
        out = object.__new__(SquareMetric)
        out.__dict__.update({k: v for k, v in self.__dict__.items() if k not in ("t", "V")})
        out._set_output(C_theta)
        return out

    def solve(self, G: np.ndarray, c: float = 1.0, lam: float | None = None) -> np.ndarray:
        """``H_c⁻¹ G`` for G of shape (D_x, D_θ): solves ``c C_X X C_Θ + λ X = G`` (another λ reuses the same
        eigendecomposition: a λ path needs one)."""
        return self._solve_rotated(self.U.T @ np.asarray(G, dtype=np.float64), c, lam)

    def _solve_rotated(self, G_hat: np.ndarray, c: float, lam: float | None) -> np.ndarray:
        """``H_c⁻¹ G`` from ``G_hat = Pᵀ G``."""
        shift = self.lam if lam is None else float(lam)
        return rotated_sylvester(self.U, c * self.a, self.V, self.t, G_hat, shift=shift)


def mm_step(
    metric: SquareMetric, B: np.ndarray, grad: np.ndarray, c: float, lam: float | None = None
) -> tuple[np.ndarray, float]:
    """The minimiser of the bound (MM) at B with metric ``c H``: ``B − (c H)⁻¹ ∇J(B)``, and the decrement.

    Returns
    -------
    B_new : ndarray of shape (D_x, D_θ), float64
    decrement : float
        ``<∇J, (cH)⁻¹ ∇J>``: the bound promises ``J(B_new) ≤ J(B) − decrement / 2`` (when it holds), so
        ``decrement / 2`` is the stopping measure (relative to J).
    """
    step = metric.solve(grad, c, lam)
    return B - step, inner(grad, step)


class MMRun:
    """One accelerated MM minimisation of (P_rf) at one λ, advanced one gradient pass at a time by its caller.

    Nesterov momentum in the metric H with O'Donoghue & Candès restarts: the momentum is dropped when it points
    uphill (gradient test, free) or when an evaluated point raises J (function test: that point is rejected and
    the step retaken without momentum); a step that raises J without momentum means the bound (MM) failed (a sampled
    covariance): then the metric is doubled. J never increases between accepted points. The caller evaluates the
    points :meth:`propose` returns (one gradient pass, shared by every run of a λ path) and reports them to
    :meth:`update`.

    Parameters
    ----------
    metric : SquareMetric
    lam : float
        λ of this run (the metric's eigendecomposition serves every λ).
    B, B_prev : ndarray of shape (D_x, D_θ)
        Current point and previous iterate of the momentum (equal at a start).
    J : float
        J(B).
    grad : ndarray of shape (D_x, D_θ)
        ∇J(B).
    tol : float
        Converged when the bound promises a decrease ``decrement / 2 <= tol · |J|``.
    t, c : float, default 1
        Momentum parameter and metric scale (a resumed run passes its saved ones).
    """

    def __init__(self, metric, lam, B, B_prev, J, grad, tol, t=1.0, c=1.0):
        self.metric, self.lam, self.tol = metric, float(lam), float(tol)
        self.B, self.B_prev, self.J, self.grad = B, B_prev, float(J), grad
        self.t, self.c = float(t), float(c)
        self.decrement = float("nan")
        self.converged = False
        self._next = None

    def propose(self) -> np.ndarray | None:
        """The next point to evaluate, or None when converged (:attr:`decrement` is the bound's promise × 2)."""
        B_next, dec = mm_step(self.metric, self.B, self.grad, self.c, self.lam)
        self.decrement = dec
        if dec / 2 <= self.tol * abs(self.J):
            self.converged = True
            return None
        if self.t > 1.0 and inner(self.grad, B_next - self.B_prev) > 0:
            self.t = 1.0
        t_next = (1.0 + math.sqrt(1.0 + 4.0 * self.t * self.t)) / 2.0
        self._next = (B_next, t_next)
        return B_next + ((self.t - 1.0) / t_next) * (B_next - self.B_prev)

    def update(self, Y: np.ndarray, J_new: float, grad_new: np.ndarray) -> bool:
        """Take the evaluated point Y (``J(Y)``, ``∇J(Y)``) if it does not raise J; returns whether it was taken."""
        B_next, t_next = self._next
        if J_new <= self.J:
            self.B_prev, self.B, self.J, self.grad, self.t = B_next, Y, float(J_new), grad_new, t_next
            return True
        if self.t > 1.0:
            self.t = 1.0  # retake the step from B without momentum
        else:
            self.c *= 2.0  # the bound failed: a stronger metric, from the same point
        return False


def mm_steps(run: MMRun, gradient_pass, max_passes: int):
    """Advance ``run`` one gradient pass at a time: a generator yielding ``(Y, sums, accepted)`` after every pass
    (so that its caller can checkpoint or report between passes), until the run converges or ``max_passes`` passes.

    Parameters
    ----------
    run : MMRun
    gradient_pass : callable ``B -> GradSums``
        One pass over the rows at B (a map-reduce of :func:`grad_task`).
    max_passes : int
        Passes at most (further than those already made).
    """
    for _ in range(max(0, int(max_passes))):
        Y = run.propose()
        if Y is None:
            return
        gs = gradient_pass(Y)
        accepted = run.update(Y, gs.objective(Y, run.lam), gs.gradient(Y, run.lam))
        yield Y, gs, accepted


def mm_minimize(
    metric: SquareMetric,
    lam: float,
    B0: np.ndarray,
    gradient_pass,
    tol: float,
    max_passes: int,
    sums0: GradSums | None = None,
) -> tuple[np.ndarray, float, int, GradSums]:
    """Minimise (P_rf) at λ by accelerated MM from B0 (:class:`MMRun`), one :func:`grad_task` pass per step.

    Parameters
    ----------
    sums0 : GradSums, optional
        The sums at B0 under the same loss (they do not depend on λ): the first pass is then not made (a λ path
        warm-started at its neighbour's model).

    Returns
    -------
    B : ndarray of shape (D_x, D_θ), float64
    J : float
        J(B).
    passes : int
        Gradient passes made (the first, at B0, included unless ``sums0`` was given).
    sums : GradSums
        The sums at B.
    """
    B0 = np.asarray(B0, dtype=np.float64)
    gs = gradient_pass(B0) if sums0 is None else sums0
    run = MMRun(metric, lam, B0, B0.copy(), gs.objective(B0, lam), gs.gradient(B0, lam), tol)
    passes = int(sums0 is None)
    for _, sums, accepted in mm_steps(run, gradient_pass, max_passes - passes):
        passes += 1
        if accepted:
            gs = sums
    return run.B, run.J, passes, gs
