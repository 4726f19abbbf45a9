"""``OutputKernelRegressor``: structured outputs through a kernel on the outputs (MATH.md §8; seed 002's robust
input–output kernel regression, seed 004's loss trick and decoding).

The model is ``h(x) = (1/(Λn)) Σ_i k_X(x, x_i) a_i`` in the output RKHS of ``k_Y`` (:mod:`rffor.output_kernels`),
with ``a_i`` the rows of the solution A of seed 002's dual, which is the eigenbasis dual (D_e) of MATH.md §3.2 with
``Y := V`` (a factor ``K_Y = V Vᵀ`` of the training outputs' Gram matrix, r columns) and t = 1
(:meth:`rffor.solvers.dual.DualProblem.structured`):

    F(A) = (q/2)‖A‖_F² − <A, V>_F + (1/(2Λn)) Tr(K_X A Aᵀ) + Σ_i ψ_e(a_i),       A ∈ R^{n×r}

=====================================  ===========================  ===================================  ======
loss (seed 002)                        primal L(r), r ∈ H_Y          ψ_e(a)                               q
=====================================  ===========================  ===================================  ======
Ridge: ``Square()``                    ½‖r‖²                        0                                    1
ε-Ridge (P1): ``EpsilonInsensitive``   ½ (‖r‖ − ε)₊²                ε‖a‖                                 1
Huber (P2): ``Huber(kappa, p=2)``      ½‖r‖² or κ(‖r‖ − κ/2)        ι{‖a‖ ≤ κ}                           1
ε-SVR (P3): ``EpsilonSVR``             (‖r‖ − ε)₊                   ε‖a‖ + ι{‖a‖ ≤ 1}                    0
=====================================  ===========================  ===================================  ======

with ‖·‖ the norm of the output RKHS (the Euclidean norm of the coordinates of V, which are isometric). This is
(D1)–(D3) of seed 002 (Theorem 6) with ``W = A``: expanding ``½‖AW − B‖² `` with ``AᵀA = K_X/(Λn) + I`` (or
``K_X/(Λn)`` for ε-SVR) and ``AᵀB = V`` gives F up to a constant. **Units**: Λ, κ and ε are seed 002's (and the
paper code's: its coefficients are ``W/(Λn)``). Against other libraries: the square loss with ``Linear()`` is
scikit-learn's multi-output ``KernelRidge(alpha=n·Λ)`` (``Σ‖y_i − h(x_i)‖² + nΛ‖h‖²`` is 2n times (P)); against
:class:`~rffor.FunctionalRegressor` with an identity output kernel on m labels, ``λ = Λ/m`` and ``κ, ε`` divided by
√m (its norms are μ_m norms, MATH.md §8).

**Optimality (KKT)**, derived from ``a_i ∈ ∂L(r_i)`` at the optimum with ``r_i = ψ(y_i) − h(x_i)`` (the dual
variable of sample i is the gradient of its loss at its residual; in V coordinates, ``r_i = v_i − (K_X A)_i/(Λn)``):
Huber ``a_i = r_i min(1, κ/‖r_i‖)``, so ‖a_i‖ = min(‖r_i‖, κ); ε-Ridge ``a_i = r_i (1 − ε/‖r_i‖)₊``, ‖a_i‖ =
(‖r_i‖ − ε)₊; ε-SVR ``a_i = r_i/‖r_i‖`` where ‖r_i‖ > ε (‖a_i‖ = 1) and a_i = 0 where ‖r_i‖ < ε (only the samples
outside the tube carry the model: seed 002's data sparsity).

**Weights** (seed 004): ``h(x) = Σ_j α_j(x) ψ(y_j)`` with
``α(x) = V⁺ᵀ Aᵀ k_X(X, x)/(Λn) + (I − Π)(K_X + nΛI)⁻¹ k_X(X, x)``, Π = V V⁺ the projector on the range of K_Y. The
first term is what the fit determines (MATH.md §8: ``c U diag(s^{-1/2}) Aᵀ k_x`` for V = U diag(√s)); the second is
invisible to h and to every kernel decoding (it is orthogonal to every column of K_Y) and is seed 004's weights'
part outside the range of K_Y, so that for the square loss α(x) = (K_X + nΛI)⁻¹ k_X(X, x) for any output kernel,
and α is continuous as κ → ∞ or ε → 0 (then A V⁺ → (I + K_X/(Λn))⁻¹ Π).

**Decoding** (MATH.md §8): ``decode(X, candidates)`` returns ``argmin_z k(z, z) − 2 <h(x), ψ(z)>`` over the
candidates; ``predict`` uses the closed form of the output type where the output kernel has one
(:meth:`rffor.output_kernels.OutputKernel.decoder`: label sets with ``Linear()`` are Y_trainᵀα(x) thresholded at ½;
histograms with ``Hellinger()`` ``z ∝ (w₊)²``, with ``Linear()`` the projection of w on the simplex; vectors with
``Linear()`` h itself), the classes seen in training for :class:`~rffor.output_kernels.Delta`, and a 1-D
minimisation for scalar outputs with any kernel (:func:`minimise_scalar`). Seed 004's Alg. 1 with any loss Δ (its
eq. 17), ``argmin_z Σ_j α_j(x) Δ(z, y_j)``, is :meth:`OutputKernelRegressor.decode_loss` (:func:`decode_loss`);
the kernel decoders above are its case Δ = k(z, z) − 2k(z, y) + k(y, y) for a normalised kernel.

**Missing labels** are masked, never interpolated. On the exact solvers this is possible when the output kernel's
embedding is coordinatewise (``Linear()``, ``Hellinger()``: a missing label is a missing coordinate of ψ(y_i)):
the dual then lives in the embedding's coordinates (``Y := Ψ`` with the missing entries at 0, which is isometric
too) and the loss of sample i is taken on its observed coordinates, ``L(‖(ψ(y_i) − h(x_i))_{O_i}‖)`` (the sum over
observed labels: seed 002's norm restricted to them, not rescaled by the observed count); its conjugate adds the
constraint ``a_ij = 0`` for the missing j, a projection inside the prox (:class:`_MaskedLoss`). The weights α(x)
are then undefined (the training outputs are not known in full) and :meth:`OutputKernelRegressor.alpha` refuses;
predictions and decoding use h. Any other kernel refuses NaN in ``y``: its ψ(y) is not defined without every label.

**The random-feature path** (``solver="rff"``, or "auto" beyond 5,000 rows and for a Zarr store): the outputs are
given to :func:`rffor.solvers.rff.fit_rff` through an explicit embedding ψ(y) ∈ R^D
(:mod:`rffor.outputs.kernel_embedding`: the kernel's own ψ for ``Linear()`` and ``Hellinger()``, random Fourier
features of a Gaussian output kernel, Nyström features on landmark outputs for kernels without either, e.g.
``Tanimoto()``; ``Delta()`` offers none and is refused), which plays D "curve" values with the identity output
operator (:class:`~rffor.outputs.OutputKernelSpace`; ψ is applied to each chunk where it is read, so a Zarr store
holds the raw outputs). The model is ``h(x) = Bᵀ φ_X(x)`` in ψ's coordinates (:meth:`predict_embedding`), and
every decoder works from it. **Units** (:func:`feature_units`): the functional problem averages a residual over its
D coordinates, so κ and ε are divided by √D and ``λ_FR = s Λ`` with ``s = 1/D`` for the square, Huber and ε-Ridge
losses and ``s = 1/√D`` for ε-SVR (a loss of linear growth); then the functional objective is s times seed 002's,
and with Nyström input features on all n rows and ψ an exact factor of K_Y the fit is the exact solver's
(``tests/test_structured.py``). ``lam="auto"`` selects on held-out rows in the functional units and reports
``lam_`` in seed 002's. ε-SVR is not smooth: DSGD rounds (``rff_method="sgd"``), not MM passes. Missing labels
are masked by coordinatewise ψ only, and each row is averaged over all D coordinates with a missing label a zero
residual (:attr:`rffor.outputs.OutputKernelSpace.row_average`; not over its own observed count, the rule of curves):
its loss is then s times the exact path's, summed over the observed labels, and the fit with Nyström input features
on all n rows is the exact solver's on masked labels too (``tests/test_structured.py``). The weights α(x) are an
exact-solver notion (weights on the training outputs) and stay there.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._validation import check_seed, check_X
from .estimator import FunctionalRegressor, _is_dataset, _saved_array
from .kernels import Kernel
from .losses import Loss, Square
from .output_kernels import DEFAULT_RANK_TOL, OUTPUT_TYPES, Linear, OutputKernel
from .outputs.kernel_embedding import OUTPUT_EMBEDDINGS
from .settings import AUTO_EXACT_MAX_N, DEFAULTS, sklearn_constraints
from .solvers import EXACT_SOLVERS
from .solvers.dual import DualProblem

__all__ = [
    "OutputKernelRegressor",
    "choose_solver",
    "solve_structured",
    "decode_closed_form",
    "kernel_loss",
    "minimise_scalar",
    "decode_scalar",
    "decode_loss",
    "ridge_weights",
]

#: tolerance on the row sums of histogram outputs (``output_type="histogram"``)
_SIMPLEX_TOL = 1e-6

#: grid points of the first stage of :func:`minimise_scalar`
_SCALAR_GRID = 256

#: the random-feature options (:class:`rffor.settings.RFSettings`) OutputKernelRegressor takes as parameters
_RF_PARAMS = (
    "loss_params", "selection_rows", "rff_method", "n_features_x", "input_features", "batch_size", "n_epochs",
    "max_steps", "step_size", "local_steps", "n_partitions", "partitions_per", "dtype",
)  # fmt: skip


def feature_units(loss: Loss, dim: int) -> tuple[Loss, float]:
    """Seed 002's units mapped to the functional problem on an embedding of dimension D (MATH.md §8).

    The random-feature model reads a residual r ∈ R^D through the μ_D norm ``‖r‖_μ = ‖r‖/√D`` (MATH.md §1), so the
    loss with κ or ε divided by √D is ``L_FR(r) = s · L(‖r‖)`` with ``s = 1/D`` for the losses of quadratic
    growth (square, Huber, ε-Ridge: jointly homogeneous of degree 2 in (r, κ, ε)) and ``s = 1/√D`` for ε-SVR
    (degree 1). Then ``(1/n) Σ L_FR + (λ/2)‖B‖² = s [(1/n) Σ L + (λ/(2s))‖h‖²]``: the same minimiser as seed 002's
    (P) with ``Λ = λ/s``, i.e. **λ_FR = s Λ** (Λ/D for the first three). s is measured on the loss itself (its
    value on a residual beyond κ and ε), so it holds for any loss of the norm with such a homogeneity.

    Returns
    -------
    (loss_fr, s) : the loss with κ/ε divided by √D, and s.
    """
    root = math.sqrt(dim)
    name = loss.param_name
    par = 0.0 if name is None else float(getattr(loss, name))
    loss_fr = loss if name is None else loss.with_param(par / root)
    r = np.zeros((1, dim))
    r[0, 0] = 3.0 * (1.0 + par)  # ‖r‖ beyond κ and ε; L(‖r‖) is the library's loss at √D r (μ_D norm ‖r‖)
    s = float(loss_fr.curve_values(r)[0] / loss.curve_values(r * root)[0])
    return loss_fr, s


@dataclass(frozen=True, eq=False)
class _MaskedLoss:
    """The row term of the structured dual (D_e) for a p = 2 loss restricted to the observed coordinates of each row
    (module docstring, "Missing labels"); what :class:`~rffor.solvers.dual.DualProblem` reads of a loss, and no
    more (it is not a :class:`~rffor.losses.Loss` of curves: its rows have their own masks).

    ``L_i(r) = L(r_{O_i})``: the primal value zeroes the missing coordinates of the residuals before the base loss
    (whose μ_D norm, rescaled by √D in :meth:`DualProblem.primal_value`, is then the Euclidean norm over O_i); the
    conjugate is ``L*(a) + ι{a_j = 0, j ∉ O_i}``, whose prox zeroes the missing coordinates and applies the base prox
    (exact: ψ_e is a function of ‖a‖ and the constraint a coordinate subspace).
    """

    base: Loss
    mask: np.ndarray

    supports_eigen = True
    needs_levels = False
    has_dual = True  # a p = 2 loss of the seed papers (OutputKernelRegressor._loss accepts no other)

    @property
    def dual_quadratic(self) -> float:
        return self.base.dual_quadratic

    @property
    def is_square(self) -> bool:
        return self.base.is_square

    def curve_values(self, R, theta=None):
        return self.base.curve_values(np.where(self.mask, R, 0.0))

    def value(self, R, theta=None) -> float:
        """Mean row loss (as :meth:`rffor.losses.Loss.value`)."""
        return float(np.mean(self.curve_values(R))) if len(R) else 0.0

    def dual_penalty_eigen(self, A):
        if np.any(np.asarray(A)[~self.mask] != 0):
            return math.inf
        return self.base.dual_penalty_eigen(A)

    def prox_dual_eigen(self, U, step):
        return self.base.prox_dual_eigen(np.where(self.mask, U, 0.0), step)


def decode_closed_form(kernel: OutputKernel, output_type: str, H: np.ndarray) -> np.ndarray | None:
    """The closed-form decoder of ``output_type`` with ``kernel`` applied to predicted embeddings H (n, D), or None
    when the kernel has none (:meth:`rffor.output_kernels.OutputKernel.decoder`)."""
    decoder = kernel.decoder(output_type) if kernel.has_embedding else None
    return None if decoder is None else decoder(H)


def kernel_loss(kernel: OutputKernel, P: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``Δ(p_i, y_i) = k(p_i, p_i) − 2k(p_i, y_i) + k(y_i, y_i) = ‖ψ(p_i) − ψ(y_i)‖²`` per row (seed 004 eq. 3), in
    canonical forms; with an explicit embedding, NaN entries of Y (missing labels) are left out of the sum.

    Returns
    -------
    ndarray of shape (n,)
    """
    if kernel.has_embedding:
        D = kernel.embedding(P) - kernel.embedding(Y)
        return np.nansum(D * D, axis=1)
    k_py = np.concatenate([np.diag(kernel.gram(P[i : i + 512], Y[i : i + 512])) for i in range(0, len(P), 512)])
    return kernel.diag(P) + kernel.diag(Y) - 2.0 * k_py


def choose_solver(problem: DualProblem, solver: str = "auto") -> str:
    """``solver`` itself; "auto" is ADMM (:func:`solve_structured`: with its fixed penalty it certified every fit of
    seed 002's YEAST protocol in at most a few hundred iterations, and needs 10–40 where APGD needs hundreds to
    thousands when K_X is ill-conditioned, e.g. 1-D inputs; ``benchmarks/structured.py``)."""
    return "admm" if solver == "auto" else solver


def solve_structured(problem: DualProblem, solver: str, *, tol: float, max_iter=None, warm_start=True, callback=None):
    """Solve a structured dual (:meth:`DualProblem.structured`) with an exact solver and this problem's settings.

    ADMM runs with a fixed penalty ``ρ = max(1, min H)`` (``balance=inf``: no residual balancing). With K_X well
    conditioned and Λ small, every eigen-mode of the smooth part has curvature ``H ≥ 1 + c s_min ≫ 1``; ADMM's
    default start ρ = 1 with residual balancing then took thousands of iterations or stalled (seed 002's YEAST
    protocol: 88 of 600 ε-Ridge fits above a gap of 1e-6 after 5,000 iterations at Λ ≤ 3e-7), while ρ = min H fixed
    took 17 (ε-Ridge), 56 (ε-SVR, ε = 0.1) and 310 (ε-SVR, ε = 1) at Λ = 1e-8; with min H = 1 (1-D inputs) the
    balancing never triggered and the counts were the same (``benchmarks/structured.py`` reports the counts).

    Parameters
    ----------
    problem : DualProblem
    solver : {"admm", "apgd"}
    tol : float
    max_iter : int or None
        None: the solver's default (:data:`rffor.solvers.EXACT_SOLVERS`).
    warm_start : bool or ndarray
    callback : callable or None

    Returns
    -------
    SolverResult
    """
    from .solvers import solver_default

    max_iter = solver_default(solver, "max_iter") if max_iter is None else max_iter
    kwargs = {}
    if solver == "admm":
        kwargs = {"rho": max(1.0, float(problem.hessian_diag.min())), "balance": math.inf}
    return EXACT_SOLVERS[solver](
        problem, tol=tol, max_iter=max_iter, warm_start=warm_start, callback=callback, **kwargs
    )


def decode_scalar(kernel: OutputKernel, Y_fit: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Scalar outputs, any kernel: ``argmin_z k(z, z) − 2 Σ_j w_j k(z, y_j)`` per row of the weights, over the range
    of the training outputs (:func:`minimise_scalar`; MATH.md §8, "a scalar output, a 1-D minimisation").

    Parameters
    ----------
    kernel : OutputKernel
    Y_fit : ndarray of shape (n, 1)
        The training outputs.
    weights : ndarray of shape (n_new, n)
        α(x) for each new input (any weights whose component in the range of K_Y is α's).

    Returns
    -------
    z : ndarray of shape (n_new,)
    """
    y = Y_fit[:, 0]
    lo, hi = float(np.min(y)), float(np.max(y))

    def objective(Zc):
        if Zc.shape[1] > 1:  # the first stage: one grid shared by every row, one Gram matrix
            grid = Zc[0][:, None]
            return kernel.diag(grid)[None, :] - 2.0 * (weights @ kernel.gram(Y_fit, grid))
        z = Zc[:, :1]  # one point per row
        inner = np.einsum("ij,ji->i", weights, kernel.gram(Y_fit, z))
        return (kernel.diag(z) - 2.0 * inner)[:, None]

    return minimise_scalar(objective, lo, hi, weights.shape[0])


def ridge_weights(eig_x: tuple[np.ndarray, np.ndarray], K_new: np.ndarray, lam: float) -> np.ndarray:
    """Seed 004's weights of the square loss (its eq. 6; MATH.md §8): ``α(x) = (K_X + nΛI)⁻¹ k_X(X, x)`` for each row
    of ``K_new``, from the eigendecomposition of K_X.

    Parameters
    ----------
    eig_x : (s, U)
        ``K_X = U diag(s) Uᵀ`` (:func:`rffor._linalg.eigh_psd`), n training inputs.
    K_new : ndarray of shape (n_new, n)
        ``k_X(x, x_j)`` for the new inputs.
    lam : float
        Λ (seed 002's units; ``KernelRidge(alpha=nΛ)``).

    Returns
    -------
    alpha : ndarray of shape (n_new, n)
    """
    s, U = eig_x
    return ((K_new @ U) / (s + len(s) * lam)) @ U.T


def decode_loss(delta, Y_fit: np.ndarray, weights: np.ndarray, candidates: np.ndarray | None = None) -> np.ndarray:
    """Seed 004's Alg. 1 with any loss Δ (its eq. 17, the loss trick's decoding; MATH.md §8):
    ``ẑ(x) = argmin_z Σ_j w_j(x) Δ(z, y_j)`` per row of the weights, over candidate outputs or, for scalar outputs
    without candidates, over the range of the training outputs (:func:`minimise_scalar`).

    The kernel decoder (:func:`decode_scalar`, :meth:`OutputKernelRegressor.decode`) is the case
    ``Δ(z, y) = k(z, z) − 2k(z, y) + k(y, y)`` with a normalised kernel (seed 004 eq. 3); any other Δ needs the
    full weights α(x) of the training outputs (:meth:`OutputKernelRegressor.alpha`), not only their part in the
    range of K_Y.

    Parameters
    ----------
    delta : callable(Z, Y) -> ndarray of shape (len(Z), len(Y))
        The loss Δ(z_k, y_j) for every pair; Z and Y in the canonical form of the training outputs (2-D (·, m),
        or 1-D class labels).
    Y_fit : ndarray of shape (n, m) or (n,)
        The training outputs.
    weights : ndarray of shape (n_new, n)
        α(x) for each new input.
    candidates : ndarray of shape (n_c, m) or (n_c,), or None
        None: scalar outputs (m = 1) only, minimised over [min y, max y].

    Returns
    -------
    z : ndarray of shape (n_new, m) or (n_new,) with candidates (the best candidate per row), (n_new,) without
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.ndim != 2 or weights.shape[1] != len(Y_fit):
        raise ValueError(f"weights must have shape (n_new, {len(Y_fit)}), got {weights.shape}")
    if candidates is not None:
        L = np.asarray(delta(candidates, Y_fit), dtype=np.float64)
        if L.shape != (len(candidates), len(Y_fit)):
            raise ValueError(f"delta(Z, Y) must return shape {(len(candidates), len(Y_fit))}, got {L.shape}")
        return candidates[np.argmin(weights @ L.T, axis=1)]
    if Y_fit.ndim != 2 or Y_fit.shape[1] != 1:
        raise ValueError("candidates=None decodes scalar outputs only (training outputs of one column): give them")
    y = Y_fit[:, 0]

    def objective(Zc):
        if Zc.shape[1] > 1:  # the first stage: one grid shared by every row
            return weights @ np.asarray(delta(Zc[0][:, None], Y_fit), dtype=np.float64).T
        L = np.asarray(delta(Zc[:, :1], Y_fit), dtype=np.float64)  # (n_new, n): row i's z against every y_j
        return np.einsum("ij,ij->i", weights, L)[:, None]

    return minimise_scalar(objective, float(np.min(y)), float(np.max(y)), weights.shape[0])


def minimise_scalar(objective, lo: float, hi: float, n_rows: int, *, grid: int = _SCALAR_GRID, iters: int = 60):
    """Minimise ``objective(z)`` over [lo, hi] for each of ``n_rows`` rows at once: a grid of ``grid`` points, then
    golden-section search in the bracket around each row's best grid point (exact for a function unimodal there;
    the grid step bounds the error otherwise).

    Parameters
    ----------
    objective : callable(Z) -> ndarray
        ``Z`` of shape (n_rows, k): candidate values per row; returns the values (n_rows, k).
    lo, hi : float
    n_rows : int

    Returns
    -------
    z : ndarray of shape (n_rows,)
    """
    g = np.linspace(lo, hi, grid)
    F = objective(np.broadcast_to(g, (n_rows, grid)))
    k = np.argmin(F, axis=1)
    a = g[np.maximum(k - 1, 0)]
    b = g[np.minimum(k + 1, grid - 1)]
    best_z, best_f = g[k], F[np.arange(n_rows), k]
    ratio = (math.sqrt(5.0) - 1.0) / 2.0
    c = b - ratio * (b - a)
    d = a + ratio * (b - a)
    fc = objective(c[:, None])[:, 0]
    fd = objective(d[:, None])[:, 0]
    for _ in range(iters):
        left = fc < fd
        b = np.where(left, d, b)
        a = np.where(left, a, c)
        c_new = b - ratio * (b - a)
        d_new = a + ratio * (b - a)
        c, d = np.where(left, c_new, d), np.where(left, c, d_new)
        f_new = objective(np.where(left, c, d)[:, None])[:, 0]
        fc, fd = np.where(left, f_new, fd), np.where(left, fc, f_new)
    z = 0.5 * (a + b)
    fz = objective(z[:, None])[:, 0]
    return np.where(fz <= best_f, z, best_z)


class OutputKernelRegressor(FunctionalRegressor):
    """Structured outputs by regression in the RKHS of an output kernel, with robust losses (module docstring;
    seed 002's ε-SV-, ε-Ridge- and Huber-IOKR, seed 004's decoding).

    Parameters
    ----------
    loss : Loss, default Square()
        ``Square()`` (Ridge-IOKR), ``EpsilonInsensitive(epsilon, p=2)`` (ε-Ridge), ``Huber(kappa, p=2)`` or
        ``EpsilonSVR(epsilon)`` (ε-SVR), κ and ε in the norm of the output RKHS (seed 002's units).
    kernel_x : Kernel, default None
        Input kernel; None means the Gaussian kernel of the median heuristic (as in
        :class:`~rffor.FunctionalRegressor`).
    kernel_y : OutputKernel, default None
        Output kernel (:mod:`rffor.output_kernels`); None means ``Linear()``.
    lam : float or "auto", default 1e-4
        Λ > 0 of seed 002 (``KernelRidge(alpha=n·Λ)`` for the square loss and a linear output kernel). "auto"
        (``solver="rff"`` only): chosen with κ/ε (``loss_params``) on held-out rows by the random-feature path's
        rule (:mod:`rffor.solvers.selection`), reported in seed 002's units as ``lam_``.
    output_type : {"auto", "vector", "multilabel", "histogram", "labels"}, default "auto"
        What the outputs are, for :meth:`predict`'s decoder and for validation: real vectors (a 1-D ``y`` is
        scalars), label sets in {0, 1}^m, histograms (non-negative rows summing to 1), class labels (with
        :class:`~rffor.output_kernels.Delta`). "auto": labels for Delta; for a 2-D ``y``, label sets if every entry
        is 0 or 1, histograms if the rows are on the simplex; vectors otherwise.
    solver : {"auto", "admm", "apgd", "rff"}, default "auto"
        "admm", "apgd": the exact dual (certified duality gap); "rff": the random-feature model on an explicit
        embedding ψ of the outputs (module docstring, "The random-feature path"). "auto": ADMM
        (:func:`solve_structured`) for in-memory data with n <= 5000 rows, "rff" otherwise (and for a Zarr
        :class:`rffor.data.Dataset` of raw outputs).
    tol : float, default 1e-6
        Stop at this relative duality gap; a fit that does not reach it warns (``ConvergenceWarning``, with the gap).
    max_iter : int or None, default None
        Iteration cap (None: the solver's default, :data:`rffor.solvers.EXACT_SOLVERS`).
    rank_tol : float, default 1e-12
        Factor of K_Y: eigenpairs with ``t_j ≤ rank_tol · t_max`` dropped
        (:data:`rffor.output_kernels.DEFAULT_RANK_TOL`); also the Nyström output features' truncation.
    output_embedding : {"auto", "exact", "rff", "nystrom"}, default "auto"
        rff: the embedding ψ of the outputs (:mod:`rffor.outputs.kernel_embedding`): the kernel's own ("exact":
        labels, √y), random Fourier features of a Gaussian output kernel ("rff", ``n_features_y`` of them), Nyström
        features on ``n_features_y`` distinct training outputs ("nystrom", any kernel on vectors). "auto": the first
        the kernel offers (:attr:`rffor.output_kernels.OutputKernel.feature_embeddings`), in that order.
    n_features_y : int, default 200
        rff: D of random output features, or M landmark outputs of Nyström features.
    loss_params, selection_rows, rff_method, n_features_x, input_features, batch_size, n_epochs, max_steps, \
step_size, local_steps, n_partitions, partitions_per, dtype
        rff: as in :class:`~rffor.FunctionalRegressor` (``loss_params``: κ or ε values in seed 002's units, or
        "auto"). ``max_iter`` and ``tol`` bound the MM passes.
    client, scheduler_address, security, checkpoint, resume, random_state
        rff: as in :class:`~rffor.FunctionalRegressor`.
    verbose : int, default 0

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n, r)
        The solution A (in the coordinates of the factor V, or of the embedding when outputs are masked).
    duality_gap_ : float
        Relative duality gap at the returned model (``(P − D)/max(|P|, |D|)``).
    objective_ : float
        The primal objective (seed 002's (P1)–(P3)) at the returned model.
    n_iter_ : int
    objective_history_ : ndarray
    output_type_ : str
    kernel_x_, kernel_y_ : Kernel, OutputKernel
    loss_ : Loss
    solver_ : str
    rank_ : int
        Rank r of the factor of K_Y (the embedding's dimension D when outputs are masked).
    classes_ : ndarray
        ``output_type_ == "labels"``: the classes seen in training (the candidates of :meth:`predict`).
    masked_ : bool
        Whether missing outputs were masked.
    n_features_in_ : int
    coef_, input_features_, lam_, lam_path_, random_state_
        rff: B (D_x, D), φ_X, Λ in seed 002's units (the selected one with ``lam="auto"``; ``lam_path_`` is in the
        functional problem's units, λ_FR = Λ/D), as in :class:`~rffor.FunctionalRegressor`.
    output_embedding_ : feature map
        rff: ψ (``transform(Y)`` gives the embedding of outputs Y, shape (n, D)).

    Examples
    --------
    >>> import numpy as np
    >>> from rffor import OutputKernelRegressor
    >>> from rffor.losses import Huber
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((60, 3)); Y = (X[:, :2] + 0.3 * rng.standard_normal((60, 2)) > 0).astype(float)
    >>> est = OutputKernelRegressor(Huber(kappa=0.5), lam=1e-3).fit(X, Y)
    >>> est.output_type_, est.predict(X[:2]).shape
    ('multilabel', (2, 2))
    """

    _parameter_constraints: dict = {
        "loss": [Loss, None],
        "kernel_x": [Kernel, None],
        "kernel_y": [OutputKernel, None],
        "lam": [Interval(numbers.Real, 0, None, closed="neither"), StrOptions({"auto"})],
        "output_type": [StrOptions({"auto", *OUTPUT_TYPES})],
        "solver": [StrOptions({"auto", "rff", *EXACT_SOLVERS})],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "rank_tol": [Interval(numbers.Real, 0, 1, closed="left")],
        "output_embedding": [StrOptions({"auto", *OUTPUT_EMBEDDINGS})],
        "n_features_y": [Interval(numbers.Integral, 2, None, closed="left")],
        **sklearn_constraints(_RF_PARAMS),
        "client": "no_validation",
        "scheduler_address": [str, None],
        "security": "no_validation",
        "checkpoint": [str, HasMethods(["__fspath__"]), None],
        "resume": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    # FunctionalRegressor settings that structured outputs do not have (read by its shared machinery)
    kernel_theta = None
    kernel_theta_params = None

    def __init__(
        self,
        loss=None,
        *,
        kernel_x=None,
        kernel_y=None,
        lam=1e-4,
        output_type="auto",
        solver="auto",
        tol=1e-6,
        max_iter=None,
        rank_tol=DEFAULT_RANK_TOL,
        output_embedding="auto",
        n_features_y=200,
        loss_params=DEFAULTS.loss_params,
        selection_rows=DEFAULTS.selection_rows,
        rff_method=DEFAULTS.rff_method,
        n_features_x=DEFAULTS.n_features_x,
        input_features=DEFAULTS.input_features,
        batch_size=DEFAULTS.batch_size,
        n_epochs=DEFAULTS.n_epochs,
        max_steps=DEFAULTS.max_steps,
        step_size=DEFAULTS.step_size,
        local_steps=DEFAULTS.local_steps,
        n_partitions=DEFAULTS.n_partitions,
        partitions_per=DEFAULTS.partitions_per,
        dtype=DEFAULTS.dtype,
        client=None,
        scheduler_address=None,
        security=None,
        checkpoint=None,
        resume=False,
        random_state=None,
        verbose=0,
    ):
        self.loss = loss
        self.kernel_x = kernel_x
        self.kernel_y = kernel_y
        self.lam = lam
        self.output_type = output_type
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.rank_tol = rank_tol
        self.output_embedding = output_embedding
        self.n_features_y = n_features_y
        self.loss_params = loss_params
        self.selection_rows = selection_rows
        self.rff_method = rff_method
        self.n_features_x = n_features_x
        self.input_features = input_features
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.max_steps = max_steps
        self.step_size = step_size
        self.local_steps = local_steps
        self.n_partitions = n_partitions
        self.partitions_per = partitions_per
        self.dtype = dtype
        self.client = client
        self.scheduler_address = scheduler_address
        self.security = security
        self.checkpoint = checkpoint
        self.resume = resume
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ helpers
    def _loss(self) -> Loss:
        loss = Square() if self.loss is None else self.loss
        if not loss.supports_eigen or loss.needs_levels:
            raise ValueError(
                f"loss: OutputKernelRegressor takes Square(), EpsilonInsensitive(epsilon, p=2), Huber(kappa, p=2) or "
                f"EpsilonSVR(epsilon) (losses of the norm of the output RKHS), got {loss!r}"
            )
        return loss

    def _output_kernel(self) -> OutputKernel:
        return Linear() if self.kernel_y is None else self.kernel_y

    def _kernels(self, X, theta=None):
        """(k_X, k_Y): ``kernel_x`` or the median heuristic's on X, and the output kernel."""
        kx, _ = super()._kernels(X, np.zeros(1))
        return kx, self._output_kernel()

    @classmethod
    def _param_from_spec(cls, name, value):
        if name == "kernel_y":
            from .output_kernels import output_kernel_from_spec

            return output_kernel_from_spec(value)
        return super()._param_from_spec(name, value)

    def _check_outputs(self, y, n_samples: int, kernel: OutputKernel) -> tuple[np.ndarray, str]:
        """The outputs in the kernel's canonical form and their resolved type; every check before any work."""
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: fit(X, y) with y of shape "
                "(n_samples,) or (n_samples, n_outputs)"
            )
        maskable = kernel.coordinatewise and kernel.has_embedding
        if not maskable:
            try:
                missing = bool(np.isnan(np.asarray(y, dtype=np.float64)).any())
            except (TypeError, ValueError):
                missing = False  # not numeric: kernel.check says what is wrong
            if missing:
                raise ValueError(
                    f"y has missing entries (NaN): missing labels are masked, never interpolated, and on the exact "
                    f"solvers masking needs an output kernel whose embedding is coordinatewise (Linear(), "
                    f"Hellinger()); {kernel!r} has none. Drop the incomplete rows"
                )
        Y = kernel.check(y, name="y", allow_nan=maskable)
        if Y.shape[0] != n_samples:
            raise ValueError(f"X and y must have the same number of rows, got {n_samples} and {Y.shape[0]}")
        if Y.ndim == 2:
            empty = np.isnan(Y).all(axis=1)
            if empty.any():
                raise ValueError(
                    f"y has rows with no observed value (all NaN) at rows {np.flatnonzero(empty)[:10].tolist()}; "
                    "drop them before fitting"
                )
        return Y, self._resolve_output_type(Y, kernel)

    def _resolve_output_type(self, Y: np.ndarray, kernel: OutputKernel) -> str:
        kind = self.output_type
        labels = Y.ndim == 1  # only Delta's canonical outputs are 1-D
        if kind == "auto":
            if labels:
                return "labels"
            obs = Y[~np.isnan(Y)]
            if Y.shape[1] > 1 and np.all((obs == 0) | (obs == 1)):
                return "multilabel"
            if Y.shape[1] > 1 and not np.isnan(Y).any() and _on_simplex(Y):
                return "histogram"
            return "vector"
        if (kind == "labels") != labels:
            raise ValueError(
                f"output_type={kind!r} with kernel_y={kernel!r}: class labels need the Delta output kernel, and the "
                "Delta kernel takes class labels"
            )
        obs = Y[~np.isnan(Y)] if not labels else Y
        if kind == "multilabel" and not np.all((obs == 0) | (obs == 1)):
            raise ValueError("y must hold label sets (every entry 0 or 1) for output_type='multilabel'")
        if kind == "histogram" and (np.isnan(Y).any() or not _on_simplex(Y)):
            raise ValueError(
                "y must hold histograms (non-negative rows summing to 1, no missing entry) for output_type='histogram'"
            )
        return kind

    def _run_exact_solver(self, problem: DualProblem):
        """:func:`solve_structured` with the estimator's solver, tolerance and cap; sets ``solver_``,
        ``dual_coef_``, ``n_iter_`` and ``objective_history_``."""
        callback = None
        if self.verbose:

            def callback(it, A, gap):
                if it % max(1, int(self.verbose) * 10) == 0:
                    print(f"[rffor {self.solver_}] iteration {it}: relative gap {gap:.3e}", flush=True)

        self.solver_ = choose_solver(problem, self.solver)
        result = solve_structured(problem, self.solver_, tol=self.tol, max_iter=self.max_iter, callback=callback)
        self.dual_coef_ = result.coef
        self.n_iter_ = max(1, int(result.n_iter))
        self.objective_history_ = np.asarray(result.history["primal"])
        return result

    # ---------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n, d), or a :class:`rffor.data.Dataset`
            Inputs; a Dataset (Zarr store, its "curves" the raw outputs: label sets, histograms, vectors) is
            fitted out of core with ``solver="rff"`` (then y is None).
        y : array-like of shape (n,) or (n, m)
            Outputs in the output kernel's form (:meth:`rffor.output_kernels.OutputKernel.check`): label sets,
            histograms, real vectors or scalars, class labels for Delta. NaN marks a missing label (masked; needs a
            coordinatewise embedding, module docstring).

        Returns
        -------
        self
        """
        loss = self._loss()
        kernel_y = self._output_kernel()
        if _is_dataset(X):
            if y is not None:
                raise ValueError("fit(dataset) takes the outputs from the dataset: pass y=None")
            self._resolve_solver(X.n, True)
            return self._fit_rff_structured(X, loss, kernel_y)
        X = check_X(X)
        Y, kind = self._check_outputs(y, X.shape[0], kernel_y)
        self._y_1d = np.asarray(y).ndim == 1 and kind != "labels"
        self.solver_ = self._resolve_solver(X.shape[0], False)
        if self.solver_ != "rff" and isinstance(self.lam, str):
            raise ValueError(
                f"lam='auto' selects Λ on the random-feature path (solver='rff'); solver={self.solver_!r} needs a "
                "number: use rffor.OutputKernelRegressorCV to choose it by cross-validation"
            )
        if self.solver_ == "rff":
            from .chunked import ArrayData

            Y2 = Y[:, None] if Y.ndim == 1 else Y
            data = ArrayData(X, Y2, np.arange(Y2.shape[1], dtype=np.float64))
            return self._fit_rff_structured(data, loss, kernel_y, self._y_1d)
        self.n_features_in_ = X.shape[1]
        self.output_type_ = kind
        self.loss_ = loss
        self.kernel_x_, self.kernel_y_ = self._kernels(X)
        self.masked_ = bool(Y.ndim == 2 and np.isnan(Y).any())
        if self.masked_:
            Psi = kernel_y.embedding(Y)
            mask = ~np.isnan(Psi)
            V, to_embedding = np.where(mask, Psi, 0.0), np.eye(Psi.shape[1])
            loss_dual = _MaskedLoss(base=loss, mask=mask)
        else:
            factor = kernel_y.factor(Y, self.rank_tol)
            V, to_embedding, loss_dual = factor.V, factor.to_embedding, loss
        problem = DualProblem.structured(self.kernel_x_.gram(X), V, self.lam, loss_dual)
        result = self._run_exact_solver(problem)
        self.objective_, self.duality_gap_ = float(self.objective_history_[-1]), float(result.gap)
        self.rank_ = int(V.shape[1])
        A = result.coef
        # h(x) in V coordinates is c k_xᵀ A; in the embedding's coordinates c k_xᵀ A T with Ψ = V T
        self.X_fit_ = X
        self._Y_fit = Y
        # C order, as arrays read back from a model file are: products then round the same way after load()
        self._W_emb = np.ascontiguousarray(problem.c * (A if to_embedding is None else A @ to_embedding))
        self._W_coord = np.ascontiguousarray(problem.c * A)
        # α_range(x) = V⁺ᵀ h_V(x), V⁺ᵀ = V (VᵀV)⁻¹ (V has orthogonal columns, but any factor works: pinv)
        self._V = None if self.masked_ else np.ascontiguousarray(V)
        self._coord = None if self.masked_ else np.ascontiguousarray(np.linalg.pinv(self._V).T)
        self.classes_ = np.unique(Y) if kind == "labels" else None
        self._alpha_cache = None
        return self

    def _resolve_solver(self, n: int, is_dataset: bool) -> str:
        if self.solver == "auto":
            return "rff" if is_dataset or n > AUTO_EXACT_MAX_N else "admm"
        if is_dataset and self.solver != "rff":
            raise ValueError(
                f"solver={self.solver!r} needs the data in memory; a Zarr Dataset is fitted out of core with "
                "solver='rff' (or 'auto')"
            )
        return self.solver

    def _fit_rff_structured(self, data, loss: Loss, kernel_y: OutputKernel, y_1d: bool = False):
        """The random-feature path (module docstring): ψ of the outputs (:mod:`rffor.outputs.kernel_embedding`)
        as the curves of :class:`~rffor.outputs.OutputKernelSpace`, fitted by
        :meth:`FunctionalRegressor._fit_rff` (:func:`rffor.solvers.rff.fit_rff`) with λ and κ/ε in the functional
        problem's units (:func:`feature_units`)."""
        from .outputs.kernel_embedding import OutputKernelSpace, make_output_embedding

        if not kernel_y.feature_embeddings:  # refused before any work, with the reason
            make_output_embedding(kernel_y, self.output_embedding, dim=data.m, n_features=2, seed=0)
        if not loss.is_smooth and self.rff_method in ("auto", "mm"):
            if self.rff_method == "mm" or isinstance(self.lam, str):
                raise ValueError(
                    f"loss={loss!r} is not smooth: MM passes (rff_method='mm', and lam='auto', whose selection runs "
                    "them) need a smooth loss; use rff_method='sgd' with a number for lam, or Huber / ε-Ridge"
                )
        seed = check_seed(self.random_state)
        executor = self._executor(data)
        with executor.connected(data, self.n_partitions):  # one embedded cluster for the landmarks' pass and the fit
            # the outputs' kind and the landmarks from the distinct outputs of rows drawn from all n rows (all of them
            # up to 20 M): the row indices drawn here, the rows read by the partition tasks where the data is
            seen, landmarks = self._landmark_outputs(data, (seed, 7), executor)
            if len(seen) == 0:
                raise ValueError("the outputs have no complete row to draw landmark outputs from")
            Y0 = kernel_y.check(seen, name="y")
            kind = self._resolve_output_type(Y0, kernel_y)
            emb = make_output_embedding(
                kernel_y, self.output_embedding, dim=data.m, n_features=self.n_features_y, seed=(seed, 8),
                landmarks=landmarks, rank_tol=self.rank_tol,
            )  # fmt: skip
            space = OutputKernelSpace(kernel_y, emb)
            D = space.m
            loss_fr, s = feature_units(loss, D)
            extra = {}
            if not isinstance(self.lam, str):
                extra["lam"] = s * float(self.lam)
            if self.loss_params is not None and self.loss_params != "auto":
                extra["loss_params"] = [float(v) / math.sqrt(D) for v in self.loss_params]
            if not loss.is_smooth and self.rff_method == "auto":
                extra["rff_method"] = "sgd"
            self.n_features_in_ = data.d
            self.output_type_ = kind
            self._y_1d = bool(y_1d)
            self.theta_ = space.grid
            self.kernel_x_, self.kernel_y_, self.kernel_theta_ = self.kernel_x, kernel_y, None
            self.loss_ = loss_fr
            self.solver_ = "rff"
            self._fit_rff(data, space.grid, outputs=space, executor=executor, **extra)
        # back to seed 002's units
        self.lam_ = float(self.lam) if not isinstance(self.lam, str) else float(self.lam_) / s
        name = self.loss_.param_name
        chosen = name is not None and self.loss_params is not None and isinstance(self.lam, str)
        self.loss_ = loss.with_param(float(getattr(self.loss_, name)) * math.sqrt(D)) if chosen else loss
        self.output_embedding_ = emb
        self.rank_ = D
        self.masked_ = False
        self._y_range = (float(np.min(Y0)), float(np.max(Y0))) if self._y_1d else None
        self.classes_ = None
        return self

    def _landmark_outputs(self, data, seed, executor):
        """:func:`rffor.outputs.kernel_embedding.landmark_outputs` in a session of the fit's ``executor`` over the
        raw outputs when workers read the data themselves (a Zarr store: the driver opens none of its chunks); data
        in this process's memory are read here, by the serial executor (the same rows and bits: the draw depends on
        the seed alone)."""
        from .executor import SerialExecutor
        from .outputs.kernel_embedding import landmark_outputs

        executor = executor if data.workers_can_read else SerialExecutor()
        with executor.open(data, self.n_partitions, partitions_per=self.partitions_per) as run:
            return landmark_outputs(run, data, self.n_features_y, seed)

    # ------------------------------------------------------------------ predict
    def predict_embedding(self, X) -> np.ndarray:
        """The model's output h(x) in the output RKHS.

        Parameters
        ----------
        X : array-like of shape (n_new, d)

        Returns
        -------
        H : ndarray of shape (n_new, D) or (n_new, r)
            With an explicit embedding (:attr:`rffor.output_kernels.OutputKernel.has_embedding`): the coordinates
            of h(x) = Σ_j α_j(x) ψ(y_j) in the embedding (for ``Linear()``, multi-output kernel ridge regression's
            prediction); otherwise its coordinates in the orthonormal basis of the factor V (r = ``rank_``), in which
            ψ(y_j) has coordinates ``V[j] / ...`` (the rows of V are isometric images of the ψ(y_j)). rff: the
            coordinates of h(x) in the fit's ψ (:attr:`output_embedding_`; shape (n_new, D)).
        """
        if self._is_rff():
            check_is_fitted(self, "coef_")
            X = check_X(X, n_features=self.n_features_in_, owner=type(self).__name__)
            return np.asarray(self._predict_rff(X, None), dtype=np.float64)
        return self._kernel_new(X) @ self._W_emb

    def _is_rff(self) -> bool:
        return getattr(self, "solver_", None) == "rff"

    def _kernel_new(self, X) -> np.ndarray:
        check_is_fitted(self, "dual_coef_")
        X = check_X(X, n_features=self.n_features_in_, owner=type(self).__name__)
        return self.kernel_x_.gram(X, self.X_fit_).astype(np.float64, copy=False)

    def alpha(self, X) -> np.ndarray:
        """Seed 004's weights: ``h(x) = Σ_j α_j(x) ψ(y_j)`` (module docstring, "Weights").

        Parameters
        ----------
        X : array-like of shape (n_new, d)

        Returns
        -------
        alpha : ndarray of shape (n_new, n)
            For the square loss, ``(K_X + nΛI)⁻¹ k_X(X_train, x)`` row by row.

        Raises
        ------
        ValueError
            The model was fitted with missing outputs (masked_): the weights on training outputs that are not
            known in full are not defined.
        """
        if self._is_rff():
            raise ValueError(
                "alpha: weights on the training outputs are an exact-solver notion; this model was fitted on the "
                "random-feature path (solver='rff'). Use predict_embedding or decode"
            )
        Kn = self._kernel_new(X)
        if self.masked_:
            raise ValueError(
                "alpha: this model was fitted with missing outputs (masked); weights on training outputs that are not "
                "known in full are not defined. Use predict_embedding or decode"
            )
        alpha = (Kn @ self._W_coord) @ self._coord.T
        if self.rank_ < self.X_fit_.shape[0]:  # the part outside the range of K_Y (module docstring)
            B = ridge_weights(self._alpha_factor(), Kn, self.lam)
            alpha += B - (B @ self._coord) @ self._V.T
        return alpha

    def _alpha_factor(self):
        from ._linalg import eigh_psd

        if self._alpha_cache is None:
            self._alpha_cache = eigh_psd(self.kernel_x_.gram(self.X_fit_).astype(np.float64, copy=False))
        return self._alpha_cache

    def _inner_with(self, X, Z: np.ndarray) -> np.ndarray:
        """``<h(x_i), ψ(z_k)>`` for the rows of X and candidate outputs Z (canonical form), shape (n_new, n_c)."""
        if self._is_rff():
            return self.predict_embedding(X) @ self.output_embedding_.transform(Z).T
        Kn = self._kernel_new(X)
        kernel = self.kernel_y_
        if kernel.has_embedding:
            return (Kn @ self._W_emb) @ kernel.embedding(Z).T
        return ((Kn @ self._W_coord) @ self._coord.T) @ kernel.gram(self._Y_fit, Z)

    def _check_candidates(self, candidates) -> np.ndarray:
        """Candidate outputs in canonical form, of the kind the model was fitted on (same number of columns)."""
        Z = self.kernel_y_.check(candidates, name="candidates")
        cols = self._output_columns_fit()
        if (Z.ndim == 1) != (cols is None) or (Z.ndim == 2 and Z.shape[1] != cols):
            want = "class labels (1-D)" if cols is None else f"outputs with {cols} columns"
            got = "1-D labels" if Z.ndim == 1 else f"{Z.shape[1]} columns"
            raise ValueError(f"candidates must be {want} like the training outputs, got {got}")
        return Z

    def decode(self, X, candidates) -> np.ndarray:
        """``argmin_z k(z, z) − 2 <h(x), ψ(z)>`` over candidate outputs, for each row of X (MATH.md §8).

        Parameters
        ----------
        X : array-like of shape (n_new, d)
        candidates : array-like of shape (n_c,) or (n_c, m)
            Candidate outputs of the kind the model was fitted on (same number of columns; values the output kernel
            accepts, e.g. binary for Tanimoto, class labels for Delta).

        Returns
        -------
        ndarray of shape (n_new, m), or (n_new,) for scalar outputs and class labels: the best candidate per row.
        """
        check_is_fitted(self, "solver_")
        kernel = self.kernel_y_
        Z = self._check_candidates(candidates)
        scores = kernel.diag(Z)[None, :] - 2.0 * self._inner_with(X, Z)
        best = Z[np.argmin(scores, axis=1)]
        return best[:, 0] if self._y_1d else best

    def decode_loss(self, X, delta, candidates=None) -> np.ndarray:
        """Seed 004's Alg. 1 with a loss Δ of your choice (its eq. 17): ``argmin_z Σ_j α_j(x) Δ(z, y_j)`` with the
        weights α(x) of :meth:`alpha` (:func:`decode_loss`), e.g. the Cauchy loss of seed 004's robust regression,
        ``delta = lambda Z, Y: c / 2 * np.log1p((Z - Y.T) ** 2 / c)`` for scalar outputs.

        Parameters
        ----------
        X : array-like of shape (n_new, d)
        delta : callable(Z, Y) -> ndarray of shape (len(Z), len(Y))
            Δ for every pair of a candidate and a training output, both in the training outputs' canonical form
            (2-D (·, m); 1-D for class labels).
        candidates : array-like of shape (n_c,) or (n_c, m), or None
            None: scalar outputs only, minimised over the range of the training outputs.

        Returns
        -------
        ndarray of shape (n_new, m), or (n_new,) for 1-D outputs (scalars, class labels)

        Raises
        ------
        ValueError
            Candidates of another kind than the training outputs; no candidates for outputs that are not scalars;
            a model whose weights α are not defined (:meth:`alpha`: the random-feature path, masked outputs).
        """
        if not callable(delta):
            raise TypeError(f"delta must be a callable delta(Z, Y) -> (len(Z), len(Y)) array, got {type(delta)!r}")
        check_is_fitted(self, "solver_")
        weights = self.alpha(X)  # refuses the random-feature path and masked outputs
        Z = None if candidates is None else self._check_candidates(candidates)
        if Z is None and (self.output_type_ != "vector" or self._output_columns_fit() != 1):
            raise ValueError("decode_loss: candidates=None is for scalar outputs only; give candidates")
        out = decode_loss(delta, self._Y_fit, weights, Z)
        if Z is None:
            return out if self._y_1d else out[:, None]
        return out[:, 0] if self._y_1d else out

    def predict(self, X):
        """Decoded predictions (module docstring, "Decoding").

        Parameters
        ----------
        X : array-like of shape (n_new, d)

        Returns
        -------
        ndarray of shape (n_new, m), or (n_new,) for 1-D outputs (scalars, class labels)

        Raises
        ------
        ValueError
            The output type has no closed-form decoder with this output kernel (then use :meth:`decode`).
        """
        check_is_fitted(self, "solver_")
        kind = self.output_type_
        own = not self._is_rff() or getattr(self.output_embedding_, "is_kernel_embedding", False)
        if own and self.kernel_y_.has_embedding and self.kernel_y_.decoder(kind) is not None:
            out = decode_closed_form(self.kernel_y_, kind, self.predict_embedding(X))
        elif kind == "labels":
            out = self.decode(X, self.classes_)
            return out
        elif kind == "vector" and self._output_columns_fit() == 1:
            out = self._minimise_scalar(X)[:, None]
        else:
            raise ValueError(
                f"{self.kernel_y_!r} has no closed-form decoder for {kind} outputs: use decode(X, candidates) "
                "(e.g. the training outputs as candidates)"
            )
        return out[:, 0] if self._y_1d else out

    def _output_columns_fit(self) -> int | None:
        """Columns m of the training outputs (None: class labels, 1-D)."""
        if self._is_rff():
            return int(self.output_embedding_.dim)
        return None if self._Y_fit.ndim == 1 else int(self._Y_fit.shape[1])

    def _minimise_scalar(self, X) -> np.ndarray:
        """Scalar outputs, any kernel (:func:`decode_scalar` with the weights α on the training outputs; rff:
        ``k(z, z) − 2 <h(x), ψ(z)>`` over the range of the training outputs, :func:`minimise_scalar`)."""
        if self._is_rff():
            H, psi, kernel = self.predict_embedding(X), self.output_embedding_, self.kernel_y_

            def objective(Zc):
                if Zc.shape[1] > 1:  # the first stage: one grid shared by every row
                    grid = Zc[0][:, None]
                    return kernel.diag(grid)[None, :] - 2.0 * (H @ psi.transform(grid).T)
                z = Zc[:, :1]
                return (kernel.diag(z) - 2.0 * np.einsum("ij,ij->i", H, psi.transform(z)))[:, None]

            return minimise_scalar(objective, *self._y_range, H.shape[0])
        weights = (self._kernel_new(X) @ self._W_coord) @ self._coord.T  # α_range(x): scalars are never masked
        return decode_scalar(self.kernel_y_, self._Y_fit, weights)

    def score(self, X, y, sample_weight=None):
        """Vectors: R² of :meth:`predict` (uniform average over outputs, scikit-learn's regressor score). Other
        output types: minus the mean kernel loss ``Δ(ŷ, y) = k(ŷ, ŷ) − 2k(ŷ, y) + k(y, y)`` of the decoded
        predictions (seed 004 eq. 3; label sets with Linear(): the number of wrong labels; class labels with
        Delta: 2 × the error rate); higher is better either way.

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n,) or (n, m)
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        score : float
        """
        check_is_fitted(self, "solver_")
        if self.output_type_ == "vector":
            from sklearn.metrics import r2_score

            return float(r2_score(y, self.predict(X), sample_weight=sample_weight))
        kernel = self.kernel_y_
        maskable = kernel.coordinatewise and kernel.has_embedding
        Y = kernel.check(y, name="y", allow_nan=maskable)
        P = kernel.check(self.predict(X), name="predictions")
        return -float(np.average(kernel_loss(kernel, P, Y), weights=sample_weight))

    # ---------------------------------------------------------------- state
    def _get_fitted_state(self):
        if self._is_rff():  # FunctionalRegressor's random-feature state, and what the structured outputs add
            fitted, arrays = super()._get_fitted_state()
            spec, emb_arrays = self.output_embedding_.get_state()
            fitted["structured"] = {
                "kernel_y": self.kernel_y_.to_spec(), "output_type": self.output_type_, "embedding": spec,
                "y_range": None if self._y_range is None else list(self._y_range),
            }  # fmt: skip
            arrays.update({f"embedding_{k}": v for k, v in emb_arrays.items()})
            return fitted, arrays
        check_is_fitted(self, "dual_coef_")
        fitted = {
            "solver": self.solver_,
            "loss": self.loss_.to_spec(),
            "kernel_x": self.kernel_x_.to_spec(),
            "kernel_y": self.kernel_y_.to_spec(),
            "n_features_in": int(self.n_features_in_),
            "y_1d": bool(self._y_1d),
            "output_type": self.output_type_,
            "masked": bool(self.masked_),
            "n_iter": int(self.n_iter_),
            "duality_gap": float(self.duality_gap_),
            "objective": float(self.objective_),
        }
        arrays = {
            "x_fit": self.X_fit_,
            "y_fit": self._Y_fit,
            "dual_coef": self.dual_coef_,
            "w_emb": self._W_emb,
            "w_coord": self._W_coord,
            "objective_history": np.asarray(self.objective_history_, dtype=np.float64),
        }
        if self._V is not None:
            arrays["factor"] = self._V
        if self.classes_ is not None:
            arrays["classes"] = self.classes_
        return fitted, arrays

    def _set_fitted_state(self, fitted, arrays):
        from .kernels import kernel_from_spec
        from .losses import loss_from_spec
        from .output_kernels import output_kernel_from_spec

        solver = fitted.get("solver")
        if solver == "rff":
            self._set_rff_state(fitted, arrays)
            return
        if solver not in EXACT_SOLVERS:
            raise ValueError(f"unknown solver {solver!r}")
        d = fitted.get("n_features_in")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"n_features_in must be a positive integer, got {d!r}")
        kind = fitted.get("output_type")
        if kind not in OUTPUT_TYPES:
            raise ValueError(f"unknown output_type {kind!r}")
        X_fit, Y_fit, A, W_emb, W_coord = (
            _saved_array(arrays, k) for k in ("x_fit", "y_fit", "dual_coef", "w_emb", "w_coord")
        )
        n = X_fit.shape[0] if X_fit.ndim == 2 else -1
        if X_fit.ndim != 2 or X_fit.shape[1] != d:
            raise ValueError("x_fit does not have n_features_in columns")
        if Y_fit.shape[0] != n or A.ndim != 2 or A.shape[0] != n or W_emb.shape[0] != n or W_coord.shape != A.shape:
            raise ValueError("the fitted arrays do not have one row per training sample")
        masked = bool(fitted.get("masked", False))
        V = arrays.get("factor")
        if not masked and (V is None or V.shape != A.shape):
            raise ValueError("factor is missing or has a wrong shape")
        self.solver_ = solver
        self.loss_ = loss_from_spec(fitted["loss"])
        self.kernel_x_ = kernel_from_spec(fitted["kernel_x"])
        self.kernel_y_ = output_kernel_from_spec(fitted["kernel_y"])
        self.n_features_in_ = d
        self._y_1d = bool(fitted.get("y_1d", False))
        self.output_type_ = kind
        self.masked_ = masked
        self.n_iter_ = int(fitted["n_iter"])
        self.duality_gap_ = float(fitted["duality_gap"])
        self.objective_ = float(fitted["objective"])
        self.objective_history_ = _saved_array(arrays, "objective_history")
        self.X_fit_, self._Y_fit, self.dual_coef_, self._W_emb, self._W_coord = X_fit, Y_fit, A, W_emb, W_coord
        self._V = None if masked else V
        self._coord = None if masked else np.ascontiguousarray(np.linalg.pinv(V).T)
        self.rank_ = int(A.shape[1])
        self.classes_ = arrays.get("classes") if kind == "labels" else None
        if kind == "labels" and self.classes_ is None:
            raise ValueError("classes is missing")
        self._alpha_cache = None

    def _set_rff_state(self, fitted, arrays):
        """Inverse of :meth:`_get_fitted_state` on the random-feature path."""
        from .features import feature_map_from_state
        from .output_kernels import output_kernel_from_spec

        info = fitted.get("structured")
        if not isinstance(info, dict) or info.get("output_type") not in OUTPUT_TYPES:
            raise ValueError("the structured outputs' description is missing or has an unknown output_type")
        super()._set_fitted_state(fitted, arrays)
        emb = feature_map_from_state(
            info["embedding"], {k[10:]: v for k, v in arrays.items() if k[:10] == "embedding_"}
        )
        if emb.n_features != self.coef_.shape[1]:
            raise ValueError(
                f"the output embedding has {emb.n_features} features, coef has {self.coef_.shape[1]} columns"
            )
        self.kernel_y_ = output_kernel_from_spec(info["kernel_y"])
        self.output_type_ = info["output_type"]
        self.output_embedding_ = emb
        self.rank_ = int(emb.n_features)
        self.masked_ = False
        self.classes_ = None
        self._y_range = None if info.get("y_range") is None else tuple(float(v) for v in info["y_range"])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


def _on_simplex(Y: np.ndarray) -> bool:
    """Whether every row of Y is non-negative and sums to 1 (within :data:`_SIMPLEX_TOL`)."""
    return bool(np.all(Y >= 0) and np.all(np.abs(Y.sum(axis=1) - 1.0) <= _SIMPLEX_TOL))
