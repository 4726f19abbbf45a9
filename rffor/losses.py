"""The convoluted losses of paper 000 on function-valued residuals (MATH.md §2, §3 and §5).

Every loss is ``L = ½‖·‖² □ g`` for a convex ``g``; a loss object knows

- its primal value on residual curves (``value``, ``curve_values``; MATH.md §2 table, with the empirical
  measure μ_m on the grid, NaN entries ignored and each curve averaged over its own observed count m_i),
- its gradient with respect to the residuals (``grad``; MATH.md §5 table, used by the random-feature solver),
- its dual penalty ψ and the prox of γψ in the linear-spline coordinates of (D_s) (``dual_penalty``,
  ``prox_dual``; MATH.md §3.1 table) and, for the p = 2 losses, in the eigenbasis coordinates of (D_e)
  (``dual_penalty_eigen``, ``prox_dual_eigen``; MATH.md §3.2).

A solver asks only for these methods; the estimator never looks at which loss it holds.

Pinball losses (quantile regression over all levels, MATH.md §6; thesis 003 §3.4.1, §5.4; seed 001 Table 1)
------------------------------------------------------------------------------------------------------------

Θ = [0, 1] holds the quantile levels and a scalar target y_i is the constant curve y_i(θ) = y_i. At level θ the
pointwise loss of a residual r = y − h(x)(θ) is, with ε ≥ 0 (insensitivity) and κ ≥ 0 (smoothing),

    ℓ_θ(r) = w_θ(r) s_κ((|r| − ε)₊),     w_θ(r) = θ if r ≥ 0 else 1 − θ,
    s_κ(t) = t²/(2κ) if t ≤ κ else t − κ/2          (s_0(t) = t),                                     (Q)

and ``L(r_i) = (1/m) Σ_j ℓ_{θ_j}(r_ij)`` on the level grid (the integral pinball loss under μ_m). ε = κ = 0 is the
pinball ``max(θ r, (θ − 1) r)``; ε > 0 is the ε-insensitive pinball of seed 001 (Table 1: 0 on [−ε, ε], θ(r − ε)
above, (θ − 1)(r + ε) below); κ > 0 replaces |·| by its Moreau envelope (thesis §5.4.2): quantiles as κ → 0,
expectiles (the loss times 1/κ) as κ → ∞. ε and κ are in the units of the outputs, on every grid.

Conjugate. ℓ_θ is convex with slopes in [θ − 1, θ], so ``ℓ_θ*(a) = sup_r a r − ℓ_θ(r) = +∞`` outside that interval.
For 0 ≤ a ≤ θ the supremum is over r ≥ ε: with t = r − ε, ``a ε + sup_{t ≥ 0} [a t − θ s_κ(t)]``, reached at
t = κ a / θ ≤ κ, equal to ``a ε + κ a²/(2θ)``; symmetrically for θ − 1 ≤ a ≤ 0. Hence

    ℓ_θ*(a) = ι_[θ−1, θ](a) + ε |a| + (κ/2) a² / w_θ(a).                                                (Q*)

Dual. In the μ_m inner product ``<f, g> = (1/m) Σ_j f_j g_j`` the conjugate of the integral loss is the integral of
the conjugates (Rockafellar 1976; thesis Proposition 3.13): ``L*(α) = (1/m) Σ_j ℓ_{θ_j}*(α(θ_j))``. The dual of
MATH.md §3, ``D(α) = Σ_i [L*(α_i) − <α_i, y_i>] + (1/(2λn)) Σ_ik k_X(x_i, x_k) <α_i, T α_k>``, on linear splines
(A[i, j] = α_i(θ_j), ``<α_i, T α_k> = a_iᵀ K_Θ a_k / m²``) and multiplied by m, is

    F(A) = −<A, Y>_F + (1/(2λnm)) Tr(K_X A K_Θ Aᵀ) + Σ_ij ℓ_{θ_j}*(A_ij)                                (D_q)

that is (D_s) of MATH.md §3.1 without its ½‖A‖_F² (a pinball loss is not ``½‖·‖² □ g``: ``dual_quadratic`` = 0),
with ψ(a_i) = Σ_j ℓ_{θ_j}*(a_ij). Its domain is the box ``θ_j − 1 ≤ A_ij ≤ θ_j``, in MATH.md's convention
G = ∂L/∂r: at the optimum ``A_ij ∈ ∂ℓ_{θ_j}(r_ij)`` (times m/m = 1), i.e. A_ij = θ_j where the model is below the
target and θ_j − 1 where it is above (thesis 003 writes the same set as ι_C(−α) with its opposite sign of α). The
prediction ``Ĥ = K_X A K_Θ/(λnm)``, the primal value of a dual iterate and the gap ``P(A) + F(A)/(nm)`` are those of
§3.1. The prox of γψ is entrywise (a one-dimensional convex problem: soft-threshold, the exact minimiser of the
quadratic on the half-line of u's sign, then the box, which contains 0):

    prox_γψ(u) = clip( sign(u) (|u| − γε)₊ · w/(w + γκ),  θ − 1, θ ),      w = w_θ(u).

For DSGD (MATH.md §5) ``G = ∂L/∂r = sign(r) w_θ(r) min((|r| − ε)₊/κ, 1) / m_i`` (κ > 0), and for κ = 0
``G = (θ 1{r ≥ ε} + (θ − 1) 1{r < −ε}) / m_i`` (ε = 0: θ − 1{r < 0}, MATH.md §6).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ._validation import check_real

__all__ = [
    "Loss",
    "Square",
    "Huber",
    "EpsilonInsensitive",
    "EpsilonSVR",
    "Pinball",
    "OverAllColumns",
    "loss_from_spec",
]


def _row_norms(U: np.ndarray) -> np.ndarray:
    """Euclidean norm of each row, shape (n, 1)."""
    return np.sqrt(np.einsum("ij,ij->i", U, U))[:, None]


def _shrink_factor(norms: np.ndarray, radius: float) -> np.ndarray:
    """``(1 − radius / ‖u‖)₊`` with 0/0 treated as 0 (block soft-threshold factor)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = 1.0 - radius / norms
    f[~(norms > radius)] = 0.0
    return f


def _project_factor(norms: np.ndarray, radius: float) -> np.ndarray:
    """``min(1, radius / ‖u‖)`` with 0/0 treated as 1 (projection onto a Euclidean ball)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        f = radius / norms
    f[~(norms > radius)] = 1.0
    return f


def _observed(R: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residuals with NaN replaced by 0, the observation mask and the per-curve counts m_i (n, 1)."""
    R = np.asarray(R)
    if R.ndim != 2:
        raise ValueError(f"residuals must be a 2-D array (n_curves, n_locations), got shape {R.shape}")
    mask = ~np.isnan(R)
    if mask.all():
        return R, mask, np.full((R.shape[0], 1), R.shape[1], dtype=R.dtype)
    counts = mask.sum(axis=1, keepdims=True).astype(R.dtype)
    return np.where(mask, R, 0), mask, counts


def _safe_div(num: np.ndarray, counts: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        out = num / counts
    return np.where(counts > 0, out, 0)


@dataclass(frozen=True)
class Loss:
    """Base class. Subclasses set ``name``, ``p`` and implement the primal/dual pieces."""

    #: "integral" losses are averages over θ of a pointwise loss; DSGD may subsample θ for them (MATH.md §5).
    integral: bool = field(default=True, init=False, repr=False, compare=False)
    #: whether the eigenbasis dual (D_e) is defined for this loss (p = 2 losses and the square loss).
    supports_eigen: bool = field(default=False, init=False, repr=False, compare=False)
    #: weight q of ``(q/2)‖A‖_F²`` in the dual: 1 for the losses ``½‖·‖² □ g`` of (D_s), whose conjugate holds
    #: ½‖·‖²; 0 for the pinball losses, whose conjugate is a box (their dual (D_q) is not strongly convex).
    dual_quadratic: float = field(default=1.0, init=False, repr=False, compare=False)
    #: whether the loss depends on the location θ of each residual (the pinball losses: θ is the quantile level);
    #: then every method that reads residuals or dual coefficients needs ``theta``.
    needs_levels: bool = field(default=False, init=False, repr=False, compare=False)
    #: whether the loss is convex, so that the exact solvers' dual (MATH.md §3) exists; a redescending loss
    #: (:class:`rffor.welsch.Welsch`) is fitted on the random-feature path only.
    has_dual: bool = field(default=True, init=False, repr=False, compare=False)

    @property
    def is_square(self) -> bool:
        """Whether this loss is the square loss ½‖·‖² (also Huber with κ = ∞ and ε-insensitive with ε = 0, MATH.md
        §2), so that (P) has a closed form (MATH.md §3.1, §5)."""
        return False

    @property
    def param_name(self) -> str | None:
        """The name of the loss's own hyperparameter that model selection may choose (``"kappa"``, ``"epsilon"``),
        or None."""
        return None

    @property
    def is_smooth(self) -> bool:
        """Whether the loss has a Lipschitz gradient, so that the square loss's Hessian (times a constant that
        majorize–minimize passes find by doubling) majorises it (:mod:`rffor.solvers.mm`)."""
        return True

    @property
    def has_irls_weights(self) -> bool:
        """Whether :meth:`irls_weights` offers weights (iteratively reweighted least squares warm starts)."""
        return False

    def param_floor(self, scale: float) -> float | None:
        """The smallest value of :attr:`param_name` a held-out selection may try, given ``scale``, the typical
        residual norm ‖r‖ (μ_m norm) of the held-out curves under the square-loss fit (the square root of their held-out
        curve MSE's statistic, :func:`rffor.edge_rule.held_out_statistic`); None: no floor (the convex
        losses, whose walks are bounded by :data:`rffor.solvers.selection.PARAM_RANGE` only)."""
        return None

    def with_param(self, value: float) -> Loss:
        """The same loss with its hyperparameter :attr:`param_name` set to ``value``."""
        if self.param_name is None:
            raise ValueError(f"{self!r} has no hyperparameter to set")
        return dataclasses.replace(self, **{self.param_name: float(value)})

    # ----------------------------------------------------------------- primal
    def curve_values(self, R: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Per-curve loss L(r_i) (MATH.md §2 table).

        Parameters
        ----------
        R : ndarray of shape (n, m)
            Residual curves on the grid; NaN entries are unobserved and ignored.
        theta : ndarray of shape (m,), optional
            The locations of R's columns; only losses with ``needs_levels`` (the pinball losses) read it.

        Returns
        -------
        values : ndarray of shape (n,)
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def value(self, R: np.ndarray, theta: np.ndarray | None = None) -> float:
        """Mean loss ``(1/n) Σ_i L(r_i)`` over the curves of R (shape (n, m), NaN ignored; ``theta`` as in
        :meth:`curve_values`)."""
        return float(np.mean(self.curve_values(R, theta))) if len(R) else 0.0

    def grad(self, R: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Gradient ``G = ∂L(r_i)/∂r_ij`` of each curve's loss (MATH.md §5 table).

        Parameters
        ----------
        R : ndarray of shape (n, m)
            Residuals; NaN entries are unobserved and get a zero gradient.
        theta : ndarray of shape (m,), optional
            Locations of R's columns (read by losses with ``needs_levels`` only).

        Returns
        -------
        G : ndarray of shape (n, m), same dtype as R.
        """
        raise NotImplementedError  # pragma: no cover - abstract

    def irls_weights(self, R: np.ndarray) -> np.ndarray | None:
        """Curve weights of iteratively reweighted least squares at residuals R, or None if not offered.

        A loss that returns weights ``w_i`` says that the weighted square loss ``Σ_i w_i ½‖r_i‖²`` is a useful
        quadratic model of it at R (a majoriser touching it at R for H_κ^2, so that a reweighted closed form never
        increases the objective); the random-feature warm start uses them (:func:`rffor.solvers.rff.fit_rff`).

        Parameters
        ----------
        R : ndarray of shape (n, m)
            Residuals; NaN entries are unobserved.

        Returns
        -------
        w : ndarray of shape (n,) or None
        """
        return None

    # ------------------------------------------------------------ spline dual
    def dual_penalty(self, A: np.ndarray, theta: np.ndarray | None = None) -> float:
        """``Σ_i ψ(a_i)`` of (D_s) for dual coefficients A of shape (n, m); ``inf`` outside the domain (``theta``,
        the grid, is read by losses with ``needs_levels`` only)."""
        raise NotImplementedError  # pragma: no cover - abstract

    def prox_dual(self, U: np.ndarray, step: float, theta: np.ndarray | None = None) -> np.ndarray:
        """``prox_{step·ψ}`` applied row-wise to U of shape (n, m) (MATH.md §3.1 table); returns a new array.
        A step of 0 is the projection onto the domain of ψ."""
        raise NotImplementedError  # pragma: no cover - abstract

    # ------------------------------------------------------------- eigen dual
    def dual_penalty_eigen(self, A: np.ndarray) -> float:
        """``Σ_i ψ_e(a_i)`` of (D_e) for coefficients A of shape (n, r)."""
        raise ValueError(f"{self!r} has no eigenbasis dual; use representation='splines'")

    def prox_dual_eigen(self, U: np.ndarray, step: float) -> np.ndarray:
        """``prox_{step·ψ_e}`` row-wise on U of shape (n, r) (MATH.md §3.2)."""
        raise ValueError(f"{self!r} has no eigenbasis dual; use representation='splines'")

    # ---------------------------------------------------------------- helpers
    def to_spec(self) -> dict:
        """A JSON-serialisable description, inverse of :func:`loss_from_spec`."""
        raise NotImplementedError  # pragma: no cover - abstract


@dataclass(frozen=True)
class Square(Loss):
    """Square loss ``L(f) = ½‖f‖₂²`` (g = ι_{0}, ψ = 0)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "supports_eigen", True)

    @property
    def is_square(self) -> bool:
        return True

    def curve_values(self, R, theta=None):
        R0, _, counts = _observed(R)
        return 0.5 * _safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts)[:, 0]

    def grad(self, R, theta=None):
        R0, _, counts = _observed(R)
        return _safe_div(R0, counts)

    def dual_penalty(self, A, theta=None):
        return 0.0

    def prox_dual(self, U, step, theta=None):
        return np.array(U, copy=True)

    dual_penalty_eigen = dual_penalty
    prox_dual_eigen = prox_dual

    def to_spec(self):
        return {"name": "square"}


class KappaScaled:
    """The part of a robust loss with a scale κ (a ``kappa`` field, in the units of the outputs): κ is the
    hyperparameter a selection walks, κ = ∞ is the square loss, and a finite κ offers IRLS weights."""

    @property
    def is_square(self) -> bool:
        return math.isinf(self.kappa)

    @property
    def param_name(self) -> str:
        return "kappa"

    @property
    def has_irls_weights(self) -> bool:
        return not math.isinf(self.kappa)


@dataclass(frozen=True)
class Huber(KappaScaled, Loss):
    """Huber losses of paper 000: ``p=2`` is H_κ^2 (g = κ‖·‖₂, robust to global outliers), ``p=1`` is H_κ^1
    (g = κ‖·‖₁, robust to local outliers). ``kappa`` is in the units of the outputs (MATH.md §2);
    ``kappa=inf`` gives the square loss.
    """

    kappa: float = 1.0
    p: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "kappa", check_real(self.kappa, "kappa", low=0, low_open=True, allow_inf=True))
        if self.p not in (1, 2):
            raise ValueError(f"Huber p must be 1 (integral H_κ^1) or 2 (vectorial H_κ^2), got {self.p!r}")
        object.__setattr__(self, "p", int(self.p))
        object.__setattr__(self, "integral", self.p == 1)
        object.__setattr__(self, "supports_eigen", self.p == 2)

    def curve_values(self, R, theta=None):
        R0, mask, counts = _observed(R)
        k = self.kappa
        if self.p == 1:
            a = np.abs(R0)
            pointwise = np.where(a <= k, 0.5 * a * a, k * (a - 0.5 * k))
            return _safe_div((pointwise * mask).sum(axis=1, keepdims=True), counts)[:, 0]
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))[:, 0]
        return np.where(norms <= k, 0.5 * norms**2, k * (norms - 0.5 * k))

    def grad(self, R, theta=None):
        R0, _, counts = _observed(R)
        if self.p == 1:
            return _safe_div(np.clip(R0, -self.kappa, self.kappa), counts)
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))
        return _safe_div(R0, counts) * _project_factor(norms, self.kappa)

    def irls_weights(self, R):
        """``w_i = <∇L(r_i), r_i> / <∇½‖r_i‖², r_i>`` (MATH.md §5 gradients): ``min(1, κ/‖r_i‖)`` for H_κ^2 (a
        majoriser: reweighted closed forms decrease the objective monotonically) and, for H_κ^1, a curve's average
        of ``min(1, κ/|r_ij|)`` weighted by ``r_ij²`` (not a majoriser: callers keep the best iterate). A curve
        fitted exactly weighs 1 (the quadratic part of every Huber loss). None for κ = ∞ (the square loss)."""
        if math.isinf(self.kappa):
            return None
        R0, _, counts = _observed(R)
        num = np.einsum("ij,ij->i", self.grad(R), R0)
        den = np.einsum("ij,ij->i", _safe_div(R0, counts), R0)
        return np.divide(num, den, out=np.ones_like(num), where=den > 0)

    def dual_penalty(self, A, theta=None):
        A = np.asarray(A)
        if self.p == 1:
            ok = np.max(np.abs(A), initial=0.0) <= self.kappa * (1 + 1e-10)
        else:
            ok = np.max(_row_norms(A), initial=0.0) <= math.sqrt(A.shape[1]) * self.kappa * (1 + 1e-10)
        return 0.0 if ok else math.inf

    def prox_dual(self, U, step, theta=None):
        U = np.asarray(U)
        if self.p == 1:
            return np.clip(U, -self.kappa, self.kappa)
        return U * _project_factor(_row_norms(U), math.sqrt(U.shape[1]) * self.kappa)

    def dual_penalty_eigen(self, A):
        if self.p != 2:
            return super().dual_penalty_eigen(A)
        ok = np.max(_row_norms(np.asarray(A)), initial=0.0) <= self.kappa * (1 + 1e-10)
        return 0.0 if ok else math.inf

    def prox_dual_eigen(self, U, step):
        if self.p != 2:
            return super().prox_dual_eigen(U, step)
        U = np.asarray(U)
        return U * _project_factor(_row_norms(U), self.kappa)

    def to_spec(self):
        return {"name": "huber", "kappa": self.kappa, "p": self.p}


@dataclass(frozen=True)
class EpsilonInsensitive(Loss):
    """ε-insensitive losses of paper 000: ``p=2`` is ℓ_ε^2 (zero dual rows: sparse in samples), ``p=inf`` is
    ℓ_ε^∞ (zero dual entries). ``epsilon`` is in the units of the outputs (MATH.md §2: the paper's ε is m times
    this one); ``epsilon=0`` gives the square loss.
    """

    epsilon: float = 0.1
    p: float = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_real(self.epsilon, "epsilon", low=0))
        if self.p == 2:
            p = 2
        elif isinstance(self.p, numbers.Real) and math.isinf(self.p) and self.p > 0:
            p = math.inf
        elif isinstance(self.p, str) and self.p.lower() in ("inf", "infinity"):
            p = math.inf
        else:
            raise ValueError(f"EpsilonInsensitive p must be 2 or inf, got {self.p!r}")
        object.__setattr__(self, "p", p)
        object.__setattr__(self, "integral", p == math.inf)
        object.__setattr__(self, "supports_eigen", p == 2)

    @property
    def is_square(self) -> bool:
        return self.epsilon == 0

    @property
    def param_name(self) -> str:
        return "epsilon"

    def curve_values(self, R, theta=None):
        R0, mask, counts = _observed(R)
        e = self.epsilon
        if self.p == math.inf:
            pointwise = 0.5 * np.maximum(np.abs(R0) - e, 0.0) ** 2
            return _safe_div((pointwise * mask).sum(axis=1, keepdims=True), counts)[:, 0]
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))[:, 0]
        return 0.5 * np.maximum(norms - e, 0.0) ** 2

    def grad(self, R, theta=None):
        R0, _, counts = _observed(R)
        e = self.epsilon
        if self.p == math.inf:
            return _safe_div(np.sign(R0) * np.maximum(np.abs(R0) - e, 0.0), counts)
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))
        if e == 0:
            return _safe_div(R0, counts)
        return _safe_div(R0, counts) * _shrink_factor(norms, e)

    def dual_penalty(self, A, theta=None):
        A = np.asarray(A)
        if self.p == math.inf:
            return float(self.epsilon * np.abs(A).sum())
        return float(self.epsilon * math.sqrt(A.shape[1]) * _row_norms(A).sum())

    def prox_dual(self, U, step, theta=None):
        U = np.asarray(U)
        t = step * self.epsilon
        if self.p == math.inf:
            return np.sign(U) * np.maximum(np.abs(U) - t, 0.0)
        return U * _shrink_factor(_row_norms(U), t * math.sqrt(U.shape[1]))

    def dual_penalty_eigen(self, A):
        if self.p != 2:
            return super().dual_penalty_eigen(A)
        return float(self.epsilon * _row_norms(np.asarray(A)).sum())

    def prox_dual_eigen(self, U, step):
        if self.p != 2:
            return super().prox_dual_eigen(U, step)
        U = np.asarray(U)
        return U * _shrink_factor(_row_norms(U), step * self.epsilon)

    def to_spec(self):
        return {"name": "epsilon_insensitive", "epsilon": self.epsilon, "p": "inf" if self.p == math.inf else 2}


@dataclass(frozen=True)
class EpsilonSVR(Loss):
    """ε-insensitive norm loss of seed 002's ε-SVR, (P3): ``L(f) = (‖f‖₂ − ε)₊`` (MATH.md §8), with ‖·‖₂ the μ_m
    norm of MATH.md §1 (for structured outputs, the norm of the output RKHS).

    It is ``‖·‖ □ ι{‖·‖ ≤ ε}``, not a loss ``½‖·‖² □ g``: its conjugate ``L*(α) = ε‖α‖ + ι{‖α‖ ≤ 1}`` has no ½‖α‖²,
    so its duals (D_s) and (D_e) have ``dual_quadratic`` = 0 (as the pinball losses' (D_q)) and are not strongly
    convex. In the coordinates of MATH.md §3.1 (multiply the dual by m, ‖α_i‖ = ‖a_i‖₂/√m)

        ψ(a_i) = ε√m ‖a_i‖₂ + ι{‖a_i‖₂ ≤ √m}        (D_s),        ψ_e(a_i) = ε‖a_i‖₂ + ι{‖a_i‖₂ ≤ 1}   (D_e),

    and the prox of γψ is the block soft-threshold at γε√m followed by the projection on the ball of radius √m
    (γε and 1 for ψ_e): ψ is a function of ‖a_i‖ alone, ``t ↦ εt + ι(t ≤ R)``, whose 1-D prox is
    ``min((t − γε)₊, R)``. At the optimum a_i ∈ ∂L(r_i) (scaled by √m on splines): ‖α_i‖ = 1 where ‖r_i‖ > ε and
    α_i = 0 where ‖r_i‖ < ε; the predictions depend on the few rows with α_i ≠ 0 (seed 002 §3.1: data sparsity).
    ``epsilon`` is in the units of the outputs; ε = 0 is the (non-squared) norm loss ‖f‖₂, never the square loss.
    """

    epsilon: float = 0.1

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_real(self.epsilon, "epsilon", low=0))
        object.__setattr__(self, "integral", False)
        object.__setattr__(self, "supports_eigen", True)
        object.__setattr__(self, "dual_quadratic", 0.0)

    @property
    def param_name(self) -> str:
        return "epsilon"

    @property
    def is_smooth(self) -> bool:
        """No: the norm has a kink at every residual of norm ε (and at 0 when ε = 0)."""
        return False

    def curve_values(self, R, theta=None):
        R0, _, counts = _observed(R)
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))[:, 0]
        return np.maximum(norms - self.epsilon, 0.0)

    def grad(self, R, theta=None):
        """``r_ij / (m_i ‖r_i‖₂)`` where ‖r_i‖₂ > ε, 0 inside the ε-ball (the subgradient 0 at its boundary)."""
        R0, _, counts = _observed(R)
        norms = np.sqrt(_safe_div(np.einsum("ij,ij->i", R0, R0)[:, None], counts))
        active = norms > self.epsilon
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=active & (norms > 0))
        return _safe_div(R0, counts) * scale.astype(R0.dtype, copy=False)

    def _penalty(self, A: np.ndarray, radius: float, weight: float) -> float:
        norms = _row_norms(np.asarray(A))
        if np.max(norms, initial=0.0) > radius * (1 + 1e-10):
            return math.inf
        return float(weight * norms.sum())

    def _prox(self, U: np.ndarray, threshold: float, radius: float) -> np.ndarray:
        U = np.asarray(U)
        V = U * _shrink_factor(_row_norms(U), threshold) if threshold > 0 else np.array(U, copy=True)
        return V * _project_factor(_row_norms(V), radius)

    def dual_penalty(self, A, theta=None):
        r = math.sqrt(np.shape(A)[1])
        return self._penalty(A, r, self.epsilon * r)

    def prox_dual(self, U, step, theta=None):
        r = math.sqrt(np.shape(U)[1])
        return self._prox(U, step * self.epsilon * r, r)

    def dual_penalty_eigen(self, A):
        return self._penalty(A, 1.0, self.epsilon)

    def prox_dual_eigen(self, U, step):
        return self._prox(U, step * self.epsilon, 1.0)

    def to_spec(self):
        return {"name": "epsilon_svr", "epsilon": self.epsilon}


@dataclass(frozen=True)
class Pinball(Loss):
    """Integral pinball loss over quantile levels (module docstring (Q); MATH.md §6), with optional insensitivity ε
    (seed 001) and smoothing κ (thesis 003 §5.4.2).

    The columns of the residuals are levels θ_j in [0, 1]: every method takes ``theta`` (the grid, shape (m,)).
    Its dual (D_q) is a box ``θ_j − 1 ≤ A_ij ≤ θ_j`` plus ``ε|A_ij| + κ A_ij²/(2 w)`` (module docstring (Q*)).

    Parameters
    ----------
    epsilon : float, default 0.0
        Width ε ≥ 0 of the insensitive zone, in the units of the outputs (0: the plain pinball loss).
    kappa : float, default 0.0
        Smoothing κ ≥ 0 of |·| by its Moreau envelope, in the units of the outputs (0: not smoothed). With κ > 0
        the loss is smooth, its curvature at most ``max(θ, 1 − θ)/κ``.
    """

    epsilon: float = 0.0
    kappa: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_real(self.epsilon, "epsilon", low=0))
        object.__setattr__(self, "kappa", check_real(self.kappa, "kappa", low=0))
        object.__setattr__(self, "dual_quadratic", 0.0)
        object.__setattr__(self, "needs_levels", True)

    @property
    def param_name(self) -> str | None:
        """The parameter model selection varies: ε if it is non-zero, else κ if it is, else none (a walk by factors
        cannot leave 0: pass ``Pinball(epsilon=...)`` or ``Pinball(kappa=...)`` to say which to choose)."""
        return "epsilon" if self.epsilon > 0 else ("kappa" if self.kappa > 0 else None)

    @property
    def is_smooth(self) -> bool:
        """Only the κ-smoothed pinball (κ > 0): the plain one has a kink at every level."""
        return self.kappa > 0

    @staticmethod
    def _levels(theta, m: int) -> np.ndarray:
        """The levels as a row (1, m), checked: a pinball loss is undefined without them."""
        if theta is None:
            raise ValueError("the pinball loss needs theta, the quantile levels of the residuals' columns")
        th = np.asarray(theta, dtype=np.float64).reshape(1, -1)
        if th.shape[1] != m:
            raise ValueError(f"theta has {th.shape[1]} levels but the residuals have {m} columns")
        if not np.all((th >= 0) & (th <= 1)):
            raise ValueError("theta must hold quantile levels in [0, 1]")
        return th

    def _weights(self, X: np.ndarray, th: np.ndarray) -> np.ndarray:
        """w_θ(x): θ where x ≥ 0, 1 − θ where x < 0 (module docstring (Q))."""
        return np.where(X < 0, 1.0 - th, th)

    def curve_values(self, R, theta=None):
        R0, mask, counts = _observed(R)
        th = self._levels(theta, R0.shape[1])
        t = np.maximum(np.abs(R0) - self.epsilon, 0.0)
        k = self.kappa
        smooth = t if k == 0 else np.where(t <= k, t * t / (2.0 * k), t - 0.5 * k)
        pointwise = self._weights(R0, th) * smooth
        return _safe_div((pointwise * mask).sum(axis=1, keepdims=True), counts)[:, 0]

    def grad(self, R, theta=None):
        R0, mask, counts = _observed(R)
        th = self._levels(theta, R0.shape[1]).astype(R0.dtype)
        e, k = self.epsilon, self.kappa
        if k == 0:
            G = np.where(R0 >= e, th, 0.0) + np.where(R0 < -e, th - 1.0, 0.0)
        else:
            t = np.maximum(np.abs(R0) - e, 0.0)
            G = np.sign(R0) * self._weights(R0, th) * np.minimum(t / k, 1.0)
        return _safe_div((G * mask).astype(R0.dtype, copy=False), counts)

    def dual_penalty(self, A, theta=None):
        A = np.asarray(A, dtype=np.float64)
        th = self._levels(theta, A.shape[1])
        tol = 1e-10  # rounding of iterates that sit on the box
        if np.any(A > th + tol) or np.any(A < th - 1.0 - tol):
            return math.inf
        value = self.epsilon * float(np.abs(A).sum())
        if self.kappa > 0:
            w = self._weights(A, th)
            quad = np.divide(A * A, w, out=np.zeros_like(A), where=w > 0)
            value += 0.5 * self.kappa * float(quad.sum())
        return value

    def prox_dual(self, U, step, theta=None):
        U = np.asarray(U, dtype=np.float64)
        th = self._levels(theta, U.shape[1])
        P = np.sign(U) * np.maximum(np.abs(U) - step * self.epsilon, 0.0)
        if self.kappa > 0 and step > 0:
            w = self._weights(U, th)
            P *= w / (w + step * self.kappa)
        return np.clip(P, th - 1.0, th)

    def to_spec(self):
        return {"name": "pinball", "epsilon": self.epsilon, "kappa": self.kappa}


@dataclass(frozen=True)
class OverAllColumns(Loss):
    """``base`` with every row averaged over **all** m columns, a missing entry (NaN) counting as a zero residual,
    instead of over the row's own observed count m_i (the losses' rule, module docstring).

    For a loss of the μ_m norm, ``L(‖r‖)``, a row's value is then ``L(‖r_{O_i}‖₂ / √m)``: the norm of its observed
    entries scaled as a complete row's. That is the normalisation under which an explicit embedding's units against
    the output-RKHS norm (λ_FR = s Λ, κ/√m and ε/√m, MATH.md §8) hold row by row for masked labels too, so that the
    random-feature problem is s times the exact structured dual's, which sums each row's loss over its observed
    entries (:class:`rffor.outputs.OutputKernelSpace`; :meth:`rffor.outputs.base.OutputSpace.masked_loss`). The
    gradient is ``base``'s at the zero-filled residuals, and 0 at the missing entries. Complete rows see ``base``
    itself (the same numbers, no copy). Every property of ``base`` (κ, ε, smoothness, the route it takes) is its own.

    Parameters
    ----------
    base : Loss
    """

    base: Loss | None = None

    def __post_init__(self) -> None:
        base = loss_from_spec(self.base) if isinstance(self.base, dict) else self.base
        if not isinstance(base, Loss):
            raise TypeError(f"OverAllColumns needs a loss of rffor.losses, got {self.base!r}")
        object.__setattr__(self, "base", base)
        for name in ("integral", "supports_eigen", "dual_quadratic", "needs_levels", "has_dual"):
            object.__setattr__(self, name, getattr(base, name))

    def __getattr__(self, name: str):
        # the base loss's own parameters (kappa, epsilon, p): what a selection reads through param_name
        if name.startswith("__") or name == "base":
            raise AttributeError(name)
        return getattr(self.base, name)

    is_square = property(lambda self: self.base.is_square)
    param_name = property(lambda self: self.base.param_name)
    is_smooth = property(lambda self: self.base.is_smooth)
    has_irls_weights = property(lambda self: self.base.has_irls_weights)

    def with_param(self, value: float) -> OverAllColumns:
        return OverAllColumns(self.base.with_param(value))

    def curve_values(self, R, theta=None):
        R = np.asarray(R)
        missing = np.isnan(R)
        return self.base.curve_values(np.where(missing, 0, R) if missing.any() else R, theta)

    def grad(self, R, theta=None):
        R = np.asarray(R)
        missing = np.isnan(R)
        if not missing.any():
            return self.base.grad(R, theta)
        return np.where(missing, 0, self.base.grad(np.where(missing, 0, R), theta)).astype(R.dtype, copy=False)

    def irls_weights(self, R):
        R = np.asarray(R)
        missing = np.isnan(R)
        return self.base.irls_weights(np.where(missing, 0, R) if missing.any() else R)

    # the duals see complete rows (a dual coefficient has no NaN), where this loss is ``base``: its conjugate pair
    # (a masked row's adds a_j = 0 at the missing j: the exact structured solver's row term, rffor.structured)
    def dual_penalty(self, A, theta=None):
        return self.base.dual_penalty(A, theta)

    def prox_dual(self, U, step, theta=None):
        return self.base.prox_dual(U, step, theta)

    def dual_penalty_eigen(self, A):
        return self.base.dual_penalty_eigen(A)

    def prox_dual_eigen(self, U, step):
        return self.base.prox_dual_eigen(U, step)

    def to_spec(self):
        return {"name": "over_all_columns", "base": self.base.to_spec()}


_LOSSES = {
    "square": Square,
    "huber": Huber,
    "epsilon_insensitive": EpsilonInsensitive,
    "epsilon_svr": EpsilonSVR,
    "pinball": Pinball,
    "over_all_columns": OverAllColumns,
}
#: the loss classes by their spec name (:func:`loss_from_spec`); a loss defined elsewhere registers itself with
#: :func:`register_loss`
LOSSES = _LOSSES


def register_loss(name: str, cls: type) -> type:
    """Make ``cls`` (a :class:`Loss` subclass whose ``to_spec()["name"]`` is ``name``) readable by
    :func:`loss_from_spec`; returns it."""
    if not (isinstance(cls, type) and issubclass(cls, Loss)):
        raise TypeError(f"register_loss needs a Loss subclass, got {cls!r}")
    _LOSSES[name] = cls
    return cls


# command-line short names (rffor fit --loss ...)
LOSS_ALIASES = {
    "square": ("square", {}),
    "huber1": ("huber", {"p": 1}),
    "huber2": ("huber", {"p": 2}),
    "eps2": ("epsilon_insensitive", {"p": 2}),
    "epsinf": ("epsilon_insensitive", {"p": "inf"}),
    "pinball": ("pinball", {}),
    "welsch": ("welsch", {}),
}


def loss_from_spec(spec: dict | Loss) -> Loss:
    """Inverse of ``Loss.to_spec``: ``{"name": "huber", "kappa": 0.1, "p": 1}`` -> ``Huber(0.1, 1)``."""
    if isinstance(spec, Loss):
        return spec
    if not isinstance(spec, dict) or spec.get("name") not in _LOSSES:
        raise ValueError(f"unknown loss {spec!r}; expected one of {sorted(_LOSSES)}")
    params = {k: v for k, v in spec.items() if k != "name"}
    if params.get("p") == "inf":
        params["p"] = math.inf
    return _LOSSES[spec["name"]](**params)
