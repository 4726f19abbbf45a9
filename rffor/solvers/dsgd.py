"""Local doubly stochastic gradient steps on the random-feature model (MATH.md §5; thesis 003 Algorithm 3.2).

"Doubly stochastic" in the sense of thesis 003 Algorithm 3.2: a step samples curves and, for integral losses, levels
θ (:class:`LevelSampler`), and computes residuals and gradients at the sampled levels only, so that its cost is
O(b·s·D_θ) for s levels, not O(b·m·D_θ): s columns of the grid (functional outputs, ``n_theta_samples``; off by
default: every observed location is used), or s levels drawn from μ anywhere in [0, 1] (quantile functions of
scalar targets, whose output features are evaluated off the grid). The random features are drawn once per fit,
not at every step as in Dai et al. (2014).

Pure NumPy, no Dask: the round tasks of :func:`rffor.solvers.rff.fit_rff` run exactly these functions wherever the
executor puts them (:mod:`rffor.executor`), so that a fit with P partitions on a Dask cluster equals the serial
loop with P partitions bit for bit.

The problem is (P_rf) of MATH.md §5::

    J(B) = (1/n) Σ_i L(y_i − Φ_Θ Bᵀ φ_X(x_i)) + (λ/2) ‖B‖_F²,    B ∈ R^{D_x × D_θ}

A step takes a minibatch of b curves (consecutive rows of a chunk whose rows were shuffled before their
features were computed) and, for the integral losses (square, H_κ^1, ℓ_ε^∞, pinball) with a sampler, s levels
θ_1 … θ_s shared by the minibatch (an unbiased estimate of the integral over μ, whichever curves were drawn); norm
losses (H_κ^2, ℓ_ε^2) always use whole curves::

    P = Φ_X,b B   (b × D_θ, once),   H = P Φ_Θ(θ_S)ᵀ,   R = Y_b(θ_S) − H  (unobserved entries NaN),
    G = loss.grad(R, θ_S),   ∇ = −(1/b) Φ_X,bᵀ G Φ_Θ(θ_S) + λ B,   B ← B − η_t ∇

with Y_b(θ_S) the sampled columns (grid) or ``y_b − b(θ_S)`` (scalar targets, intercept curve b). The non-crossing
penalty ``λ_nc (1/(b s)) Σ (−∂_θ(b + h)(x_i)(θ_k))₊`` (thesis 003 Theorem 5.27, anchors at the drawn levels) adds
``(λ_nc/(b s)) Φ_X,bᵀ 1{∂_θ q < 0} Φ'_Θ(θ_S)`` to the descent direction, with ``∂_θ q = P Φ'_Θ(θ_S)ᵀ + b'(θ_S)``.

``loss.grad`` averages every curve over its own number of used entries (m_i, or the subsample size), as the
table of MATH.md §5 says. The step is ``η_t = η₀ / (1 + t/t₀)^power`` (constant by default) and the returned model
is the Polyak–Ruppert average of the iterates from step ``average_start`` on (:func:`rffor.solvers.rff.fit_rff`
averages the second half of the steps). The curve losses (square, Huber, ε-insensitive) are ``½‖·‖² □ g``, so the
curvature of a step's objective is at most ``1 + λ`` (``‖φ_X‖ = 1`` and ``‖φ_Θ(θ)‖² = k_Θ(θ, θ) = 1``):
``η₀ < 1/(1 + λ)`` is safe, and ``1/(‖C_Θ‖ + λ)`` is safe for steps on whole observed curves
(:func:`rffor.solvers.round_plan.auto_step_size`). The pinball losses are not of that form (the κ-smoothed one curves up
to ``max(θ, 1 − θ)/κ``), but their gradients are bounded by 1 entrywise, so a step ``B ← (1 − ηλ) B + η (bounded)``
keeps B bounded for any ``η ≤ 1/λ``: the steps cannot diverge, and a kink (or a curvature above 1) makes them
oscillate by O(η) around the optimum, which the suffix average removes.

Measured on nonlinear synthetic data (n = 1000, m = 40, D_x = 100, λ = 1e-3; tests/test_dsgd.py): from B = 0,
50 epochs reach the square-loss closed-form objective within 2e-5 relative; from the closed-form warm start,
100 epochs reach the full-batch optimum of every robust loss within 4e-7 to 2e-5. A constant step with suffix
averaging converged faster there than decaying steps (1/√t, 1/t) or averaging from the start.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._linalg import eigh_psd
from .._validation import check_dtype, check_int, check_real
from ..chunked import chunk_rows
from ..features import seed_sequence
from ..losses import Loss
from ..settings import check_option

__all__ = [
    "Preconditioner",
    "LevelSampler",
    "LevelDraw",
    "SGDConfig",
    "SGDState",
    "sgd_steps",
    "partition_steps",
    "partition_seed",
    "epoch_steps",
    "SGD_STREAM",
]

#: spawn-key tag of the DSGD random streams: seed (s, r, p) is ``SeedSequence(s, spawn_key=(SGD_STREAM, r, p))``.
#: Feature maps use the keys (0,) and (1,) of the same random state (see :func:`rffor.solvers.rff.fit_rff`).
SGD_STREAM = 2


@dataclass
class Preconditioner:
    """``P ≈ (C_X + λI)^{-1}``, a low-rank-plus-identity approximation used to precondition DSGD steps.

    With ``C_X = Φ_Xᵀ Φ_X / n = V diag(s) Vᵀ`` (eigenvalues decreasing), keep the top k eigenpairs ``(U, s_k)``::

        P = β I + U diag(1/(s_k + λ) − β) Uᵀ,    β = 1 / (s_{k+1} + λ)

    i.e. the exact inverse on the top k directions and the eigenvalues below ``s_{k+1}`` clamped to it. Plain DSGD
    contracts the error along an eigenvector of C_X by ``1 − η s_j`` per step, so at small λ the directions with
    ``s_j ≪ 1`` barely move (MATH.md §5: the problem is λ-strongly convex only); with P every direction of the top
    k contracts at the same rate. Preconditioned, the full-data curvature along an eigenvector of C_X is at most
    ``(s ‖C_Θ‖ + λ)/(s + λ) <= max(‖C_Θ‖, 1)`` (the loss part is at most that of the square loss, ``C_X ⊗ C_Θ``);
    :func:`rffor.solvers.rff.fit_rff` takes ``η₀ = min(auto step, 0.99) / max(1, trace / b)``. Applying P to a
    (D_x, D_θ) matrix costs ``4 D_x k D_θ`` flops.

    Attributes
    ----------
    U : ndarray of shape (D_x, k)
        Top-k eigenvectors of C_X, in the fit's dtype.
    w : ndarray of shape (k,)
        ``1/(s_i + λ) − β`` (≤ 0), in the fit's dtype.
    base : float
        β.
    trace : float
        ``tr(P C_X)``, the mean of ``φ_Xᵀ P φ_X`` over the rows P was estimated on: the preconditioned curvature
        of a one-row step. A minibatch of b rows has curvature up to about ``max(1, trace / b)`` times that of the
        full data, hence the step size of :func:`rffor.solvers.rff.fit_rff` divided by that factor.
    """

    U: np.ndarray
    w: np.ndarray
    base: float
    trace: float = 1.0

    @classmethod
    def from_gram(cls, C: np.ndarray, lam: float, rank: int, dtype="float32") -> Preconditioner:
        """Build P from ``C = Φ_Xᵀ Φ_X / n`` of shape (D_x, D_x) (symmetric PSD), keeping ``rank`` eigenpairs."""
        C = np.asarray(C, dtype=np.float64)
        D = C.shape[0]
        rank = check_int(rank, "rank", 1)
        k = min(rank, D)
        s, V = eigh_psd(C)
        base = 1.0 / ((s[k] if k < D else 0.0) + lam)
        return cls(
            U=np.ascontiguousarray(V[:, :k], dtype=dtype),
            w=np.asarray(1.0 / (s[:k] + lam) - base, dtype=dtype),
            base=float(base),
            trace=float(np.sum(s[:k] / (s[:k] + lam)) + base * np.sum(s[k:])),
        )

    @property
    def rank(self) -> int:
        return self.U.shape[1]

    def apply(self, D: np.ndarray, out: np.ndarray | None = None, *, work: np.ndarray | None = None) -> np.ndarray:
        """``P D`` for D of shape (D_x, D_θ); ``out`` may be D itself; ``work``, an array like D, avoids the one
        (D_x, D_θ) temporary (the step loop passes its buffer)."""
        UtD = self.U.T @ D  # (k, D_θ)
        UtD *= self.w[:, None]
        if out is None:
            out = np.empty_like(D)
        np.multiply(D, D.dtype.type(self.base), out=out)
        out += self.U @ UtD if work is None else np.matmul(self.U, UtD, out=work)
        return out


@dataclass
class LevelDraw:
    """The levels of one step (:meth:`LevelSampler.draw`).

    Attributes
    ----------
    theta : ndarray of shape (s,)
        The levels.
    Phi : ndarray of shape (s, D_θ)
        φ_Θ at them.
    cols : ndarray of shape (s,) or None
        Grid mode: the columns of Y they are.
    weights : ndarray of shape (s,) or None
        Quadrature weights (summing to 1) replacing the plain mean over the levels.
    shift : ndarray of shape (s,) or None
        Continuous mode: the intercept curve b at the levels (the targets are ``y − b(θ)``).
    dPhi : ndarray of shape (s, D_θ) or None
        φ'_Θ at them (with the non-crossing penalty).
    slope : ndarray of shape (s,) or None
        b' at them (with the non-crossing penalty).
    """

    theta: np.ndarray
    Phi: np.ndarray
    cols: np.ndarray | None = None
    weights: np.ndarray | None = None
    shift: np.ndarray | None = None
    dPhi: np.ndarray | None = None
    slope: np.ndarray | None = None


@dataclass
class LevelSampler:
    """The level sampling of a doubly stochastic step (thesis 003 Algorithm 3.2; MATH.md §5).

    Parameters
    ----------
    n_samples : int
        s, levels per step.
    method : {"grid", "uniform", "sobol", "gauss-legendre"}, default "grid"
        "grid": s of the m grid columns, uniformly without replacement (functional outputs observed on a grid,
        and quantiles at user-given levels: joint quantile regression); the others draw levels from μ = U[0, 1]
        anywhere (:func:`rffor.levels.draw_levels`: i.i.d., scrambled Sobol, or the Gauss–Legendre nodes with
        their weights), for scalar targets, with the output features evaluated off the grid
        (:meth:`rffor.features.ExactOutputFactor.transform`: the Nyström extension).
    output_features : feature map, optional
        Continuous methods: φ_Θ with ``transform``; any method: ``derivative`` for the non-crossing penalty.
    offset : NormalOffset or None
        Continuous methods: the intercept curve b; any method: b' for the penalty.
    """

    n_samples: int
    method: str = "grid"
    output_features: Any = None
    offset: Any = None
    # grid mode with the penalty: φ'_Θ and b' on the whole grid, computed at the first draw (the grid is fixed)
    _grid_derivative: Any = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        from ..levels import LEVEL_SAMPLING

        self.n_samples = check_int(self.n_samples, "n_samples", 1)
        if self.method not in ("grid", *LEVEL_SAMPLING):
            raise ValueError(f"method must be 'grid' or one of {LEVEL_SAMPLING}, got {self.method!r}")
        if self.continuous and self.output_features is None:
            raise ValueError(
                f"level sampling {self.method!r} needs the output features (to evaluate them off the grid)"
            )

    @property
    def continuous(self) -> bool:
        """Whether levels are drawn anywhere in [0, 1] (scalar targets) rather than among grid columns."""
        return self.method != "grid"

    def stream(self, rng):
        """The per-task state of the draws: a Sobol sequence for "sobol" (:func:`rffor.levels.sobol_stream`),
        else None."""
        from ..levels import sobol_stream

        return sobol_stream(rng) if self.method == "sobol" else None

    def draw(self, rng, grid_features, grid, dtype, derivative: bool = False, stream=None) -> LevelDraw:
        """The levels of one step; O(s · cost of φ_Θ(θ)), independent of the minibatch and (continuous) of m.

        Parameters
        ----------
        rng : numpy.random.Generator
        grid_features : ndarray of shape (m, D_θ)
            Grid mode: φ_Θ on the grid.
        grid : ndarray of shape (m,) or None
            Grid mode: the grid.
        dtype : numpy dtype
        derivative : bool
            Also φ'_Θ and b' at the levels (the non-crossing penalty: needs ``output_features``).
        stream : object, optional
            :meth:`stream`'s state, continued by this draw.
        """
        phi = self.output_features
        if not self.continuous:
            m = grid_features.shape[0]
            cols = np.sort(rng.choice(m, size=min(self.n_samples, m), replace=False))
            theta = None if grid is None else np.asarray(grid)[cols]
            draw = LevelDraw(theta=theta, Phi=grid_features[cols], cols=cols)
        else:
            from ..levels import draw_levels

            theta, weights = draw_levels(self.method, self.n_samples, rng, stream)
            draw = LevelDraw(
                theta=theta,
                Phi=np.asarray(phi.transform(theta), dtype=dtype),
                weights=weights,
                shift=np.zeros(len(theta)) if self.offset is None else self.offset(theta),
            )
        if derivative and draw.cols is not None:
            if self._grid_derivative is None:
                g = np.asarray(grid, dtype=np.float64)
                slope = np.zeros(len(g)) if self.offset is None else self.offset.slope(g)
                self._grid_derivative = (np.asarray(phi.derivative(g), dtype=dtype), slope)
            dphi, slope = self._grid_derivative
            draw.dPhi, draw.slope = dphi[draw.cols], slope[draw.cols]
        elif derivative:
            draw.dPhi = np.asarray(phi.derivative(theta), dtype=dtype)
            draw.slope = np.zeros(len(theta)) if self.offset is None else self.offset.slope(theta)
        return draw


@dataclass
class SGDConfig:
    """Everything a partition task needs besides the data, the features and B (small and picklable).

    Parameters
    ----------
    loss : Loss
        Any loss of :mod:`rffor.losses` (``grad`` and ``curve_values`` are used).
    lam : float
        λ > 0 of (P_rf).
    batch_size : int, default 256
        b, curves per step.
    n_theta_samples : int or None, default None
        s, grid columns sampled per step for integral losses (``loss.integral``; a :class:`LevelSampler` in grid
        mode); None uses every observed location. Ignored for norm losses.
    step_size : float, default 0.5
        η₀; below ``1/(1 + λ)`` is always stable.
    step_decay : float, default 0.0
        ``power`` of the schedule ``η_t = η₀ / (1 + t/t₀)^power`` (0: constant step).
    step_offset : float or None, default None
        t₀ of the schedule; None means ``1 / (η₀ λ)``, the time scale of the λ-strong convexity.
    average_start : int, default 0
        Global step from which iterates are averaged (Polyak–Ruppert); before it ``B_avg`` follows ``B``.
    dtype : str or numpy dtype, default "float32"
        Type of the features, of Y and of B (the average is kept in float64).
    feature_block_rows : int, default 4096
        Input features are computed for this many rows of a chunk at a time (rounded down to a multiple of
        ``batch_size``, at least one batch): the memory of a task is about ``1.5 × feature_block_rows × D_x``
        numbers whatever the chunk size. The minibatches do not depend on it (results agree to rounding).
    precond : Preconditioner or None, default None
        Multiply every step by ``P ≈ (C_X + λI)^{-1}`` (:class:`Preconditioner`); None: plain steps.
    sampler : LevelSampler or None, default None
        How steps draw their levels (overrides ``n_theta_samples``); continuous methods read scalar targets.
    theta : ndarray of shape (m,) or None, default None
        The grid, for losses that read the levels (pinball) in full-grid and grid-sampled steps.
    lam_nc : float, default 0.0
        λ_nc of the non-crossing penalty at the step's levels (a sampler with ``output_features``).
    """

    loss: Loss
    lam: float
    batch_size: int = 256
    n_theta_samples: int | None = None
    step_size: float = 0.5
    step_decay: float = 0.0
    step_offset: float | None = None
    average_start: int = 0
    dtype: Any = "float32"
    feature_block_rows: int = 4096
    precond: Preconditioner | None = None
    sampler: LevelSampler | None = None
    theta: np.ndarray | None = None
    lam_nc: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.loss, Loss):
            raise TypeError(f"loss must be an rffor.losses.Loss, got {self.loss!r}")
        self.lam = check_real(self.lam, "lam", low=0, low_open=True)
        # the options a fit takes from its settings: validated by the settings' own rules (one home)
        for name in ("batch_size", "n_theta_samples", "step_size", "step_decay", "step_offset", "average_start"):
            setattr(self, name, check_option(name, getattr(self, name)))
        if isinstance(self.step_size, str):
            raise ValueError(f"step_size must be a number here (resolved from 'auto'), got {self.step_size!r}")
        self.feature_block_rows = check_int(self.feature_block_rows, "feature_block_rows", 1)
        self.dtype = check_dtype(self.dtype).name
        if self.precond is not None and not isinstance(self.precond, Preconditioner):
            raise TypeError(f"precond must be a Preconditioner or None, got {self.precond!r}")
        if self.sampler is None and self.n_theta_samples is not None and self.loss.integral:
            self.sampler = LevelSampler(self.n_theta_samples, "grid")
        if self.sampler is not None and not isinstance(self.sampler, LevelSampler):
            raise TypeError(f"sampler must be a LevelSampler or None, got {self.sampler!r}")
        if self.sampler is not None and not self.loss.integral:
            self.sampler = None  # norm losses need whole curves (MATH.md §5)
        self.lam_nc = check_real(self.lam_nc, "lam_nc", low=0)
        if self.lam_nc > 0 and (self.sampler is None or self.sampler.output_features is None):
            raise ValueError(
                "the non-crossing penalty of DSGD needs a LevelSampler with output_features (φ'_Θ at its levels)"
            )

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    def step_at(self, t: int) -> float:
        """Step size η_t of global step t (0-based)."""
        if self.step_decay == 0:
            return self.step_size
        t0 = self.step_offset if self.step_offset is not None else 1.0 / (self.step_size * self.lam)
        return self.step_size / (1.0 + t / t0) ** self.step_decay


@dataclass
class SGDState:
    """The iterate of DSGD.

    Attributes
    ----------
    B : ndarray of shape (D_x, D_θ)
        Current iterate, in the configuration's dtype.
    B_avg : ndarray of shape (D_x, D_θ)
        Polyak–Ruppert average of the iterates since ``average_start`` (float64): the model that is returned.
    t : int
        Global step counter (drives the step schedule; the same across partitions in a round).
    """

    B: np.ndarray
    B_avg: np.ndarray
    t: int = 0

    @classmethod
    def from_coef(cls, B: np.ndarray, dtype="float32", t: int = 0) -> SGDState:
        """A state starting at B (iterate and average both B)."""
        B = np.asarray(B)
        return cls(B=np.array(B, dtype=dtype, order="C"), B_avg=np.array(B, dtype=np.float64, order="C"), t=int(t))

    @classmethod
    def zeros(cls, D_x: int, D_theta: int, dtype="float32") -> SGDState:
        return cls(B=np.zeros((D_x, D_theta), dtype=dtype), B_avg=np.zeros((D_x, D_theta)), t=0)

    def copy(self) -> SGDState:
        return SGDState(B=self.B.copy(), B_avg=self.B_avg.copy(), t=self.t)


def sgd_steps(
    state: SGDState,
    Phi_x: np.ndarray,
    Y: np.ndarray,
    Phi_theta: np.ndarray,
    n_steps: int,
    config: SGDConfig,
    rng: np.random.Generator,
) -> tuple[SGDState, float]:
    """Run ``n_steps`` minibatch steps on one chunk whose input features were computed once.

    Minibatches are consecutive blocks of ``batch_size`` rows (the last one of the chunk may be smaller),
    cycling through the chunk if ``n_steps`` exceeds ``ceil(c / batch_size)``: shuffle the rows before
    computing the features (as :func:`partition_steps` does), not here.

    Parameters
    ----------
    state : SGDState
        Not modified: the result is a new state.
    Phi_x : ndarray of shape (c, D_x)
        Input features of the chunk's rows, in ``config.dtype``.
    Y : ndarray of shape (c, m)
        Output curves, NaN = not observed; in ``config.dtype``. With a continuous sampler, the scalar targets
        (c, 1).
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid, in ``config.dtype``.
    n_steps : int
    config : SGDConfig
    rng : numpy.random.Generator
        Used for the level draws only.

    Returns
    -------
    state : SGDState
        After the steps (``t`` advanced by ``n_steps``).
    loss_sum : float
        Sum over the steps of the minibatch loss ``(1/b) Σ_{i ∈ batch} L(r_i)`` at the iterate before the step
        (on the sampled entries): ``loss_sum / n_steps`` estimates the data term of J.
    """
    dtype = config.np_dtype
    loss, lam = config.loss, config.lam
    c = Phi_x.shape[0]
    b = config.batch_size
    B = np.array(state.B, dtype=dtype, order="C")  # the input state is never modified (Dask shares it)
    B_avg = np.array(state.B_avg, dtype=np.float64, order="C")
    t = int(state.t)
    if n_steps <= 0 or c == 0:
        return SGDState(B, B_avg, t), 0.0
    sampler, lam_nc = config.sampler, config.lam_nc
    grid = config.theta
    Phi_theta_T = np.ascontiguousarray(Phi_theta.T, dtype=dtype)
    Phi_theta = np.ascontiguousarray(Phi_theta, dtype=dtype)
    starts = range(0, c, b)
    update = np.empty_like(B)  # step buffers: no allocation (and page faults) per step
    precond = config.precond
    work = None if precond is None else np.empty_like(B)
    diff = np.empty_like(B_avg)
    loss_sum = 0.0
    stream = None if sampler is None else sampler.stream(rng)
    for k in range(n_steps):
        s = starts[k % len(starts)]
        Pb = Phi_x[s : s + b]
        bb = Pb.shape[0]
        if sampler is None:  # every location of the grid
            R = Y[s : s + b] - (Pb @ B) @ Phi_theta_T  # (bb, m); NaN where unobserved
            G = loss.grad(R, grid)
            loss_sum += float(np.mean(loss.curve_values(R, grid), dtype=np.float64))
            GP = G @ Phi_theta  # (bb, D_θ)
        else:  # s levels: the cost of the step no longer depends on m
            draw = sampler.draw(rng, Phi_theta, grid, dtype, derivative=lam_nc > 0, stream=stream)
            PB = Pb @ B  # (bb, D_θ)
            H = PB @ draw.Phi.T  # (bb, s)
            if draw.cols is not None:
                R = Y[s : s + b, draw.cols] - H
            else:  # scalar targets: y − b(θ) at the drawn levels
                R = (Y[s : s + b, :1] - draw.shift.astype(dtype)) - H
            G = loss.grad(R, draw.theta)
            if draw.weights is None:
                loss_sum += float(np.mean(loss.curve_values(R, draw.theta), dtype=np.float64))
            else:  # quadrature: Σ_k w_k ℓ(θ_k) instead of the mean over the levels
                G *= (len(draw.weights) * draw.weights).astype(dtype)
                per_level = [np.mean(loss.curve_values(R[:, [j]], draw.theta[[j]])) for j in range(R.shape[1])]
                loss_sum += float(np.dot(draw.weights, per_level))
            GP = G @ draw.Phi
            if lam_nc > 0:  # the non-crossing penalty at the drawn levels (module docstring)
                slope = PB @ draw.dPhi.T + draw.slope.astype(dtype)  # ∂_θ q(x_i)(θ_k)
                below = (slope < 0).astype(dtype)
                GP += (below @ draw.dPhi) * dtype.type(lam_nc / below.shape[1])
                loss_sum += lam_nc * float(np.mean(np.maximum(-slope, 0), dtype=np.float64))
        eta = config.step_at(t)
        GP *= dtype.type(eta / bb)
        if precond is None:
            B *= dtype.type(1.0 - eta * lam)
            B += np.matmul(Pb.T, GP, out=update)  # B ← (1 − ηλ) B + (η/b) Φ_bᵀ G Φ_Θ
        else:
            np.matmul(Pb.T, GP, out=update)
            update -= np.multiply(B, dtype.type(eta * lam), out=work)
            B += precond.apply(update, out=update, work=work)  # B ← B − η P ∇
        t += 1
        if t <= config.average_start:
            B_avg[...] = B
        else:  # running mean of B_{a}, …, B_t in float64, without temporaries
            np.subtract(B, B_avg, out=diff)
            diff *= 1.0 / (t - config.average_start + 1)
            B_avg += diff
    if not (math.isfinite(loss_sum) and np.isfinite(B).all()):
        raise FloatingPointError(
            f"DSGD diverged at step {t} (step_size={config.step_size:g}): the loss or B is not finite. "
            f"Use a smaller step_size, e.g. {0.99 / (1.0 + lam):.3g} (stable for every loss: rffor.solvers.dsgd's "
            "module docstring), or a larger batch_size"
        )
    return SGDState(B, B_avg, t), loss_sum


def epoch_steps(data, chunk_ids, batch_size: int) -> int:
    """Steps of one pass over the given chunks: ``Σ_i ceil(rows_i / batch_size)``."""
    return sum(-(-chunk_rows(data, int(i)) // batch_size) for i in chunk_ids)


def partition_seed(seed) -> np.random.SeedSequence:
    """SeedSequence of a partition task from ``seed = (random_state, round, partition)``.

    That is ``SeedSequence(random_state, spawn_key=(SGD_STREAM, round, partition))``: independent of the feature
    streams of the same random state, and of which worker runs the task. A SeedSequence is used as is.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    if isinstance(seed, (tuple, list)) and len(seed) >= 1:
        return seed_sequence((seed[0], SGD_STREAM, *seed[1:]))
    return seed_sequence((seed, SGD_STREAM))


def partition_steps(
    state: SGDState,
    data,
    chunk_ids,
    n_steps: int,
    config: SGDConfig,
    input_features,
    Phi_theta: np.ndarray,
    seed,
) -> tuple[SGDState, int, float]:
    """K = ``n_steps`` local DSGD steps over one partition's chunks (MATH.md §5, periodic averaging).

    The chunks are visited in a seeded random order (a new permutation for every pass); on each visit the rows
    are shuffled, their input features computed once, and ``ceil(rows / batch_size)`` steps (or what remains of
    ``n_steps``) run on them with :func:`sgd_steps`.

    Parameters
    ----------
    state : SGDState
        Starting point (not modified).
    data : chunked dataset (:mod:`rffor.chunked`)
        The partition's data (``iter_chunks`` reads the next chunk while this one is computed, for a Zarr store).
    chunk_ids : sequence of int
        The partition's chunks.
    n_steps : int
        K, steps to run.
    config : SGDConfig
    input_features : RandomFourierFeatures
        φ_X, with ``transform(X) -> (c, D_x)`` in ``config.dtype``.
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid.
    seed : tuple (random_state, round, partition) or numpy.random.SeedSequence
        See :func:`partition_seed`; the result depends on the seed, not on where the task runs.

    Returns
    -------
    state : SGDState
    steps_done : int
        ``n_steps`` (0 if the partition is empty).
    loss_sum : float
        Sum over the steps of the minibatch losses (see :func:`sgd_steps`); divide by ``steps_done``.
    """
    chunk_ids = [int(i) for i in chunk_ids]
    n_steps = int(n_steps)
    dtype = config.np_dtype
    b = config.batch_size
    if n_steps <= 0 or not chunk_ids or epoch_steps(data, chunk_ids, b) == 0:
        return state.copy(), 0, 0.0
    rng = np.random.default_rng(partition_seed(seed))
    if config.sampler is not None and config.sampler.continuous:
        data = data.base  # the scalar targets: the steps draw their levels (rffor.chunked.ExpandedTargets)
    visits: list[int] = []
    planned = 0
    while planned < n_steps:
        for i in rng.permutation(chunk_ids):
            visits.append(int(i))
            planned += -(-chunk_rows(data, int(i)) // b)
            if planned >= n_steps:
                break
    Phi_theta = np.ascontiguousarray(Phi_theta, dtype=dtype)
    block = b * max(1, config.feature_block_rows // b)
    block = min(block, max(chunk_rows(data, i) for i in chunk_ids))
    features = np.empty((block, input_features.n_features), dtype=dtype)  # reused by every visit
    work = np.empty((block, input_features.work_columns), dtype=dtype)
    done, loss_sum = 0, 0.0
    with contextlib.closing(data.iter_chunks(visits)) as chunks:
        for _, X_i, Y_i in chunks:
            rows = X_i.shape[0]
            perm = rng.permutation(rows)
            X_p = np.asarray(X_i)[perm]
            Y_p = np.ascontiguousarray(np.asarray(Y_i)[perm], dtype=dtype)
            # features of whole minibatches at a time: memory bounded by block × D_x, each row's features
            # computed once per visit and the minibatches the same as for the whole chunk at once
            for s in range(0, rows, block):
                r = min(block, rows - s)
                k = min(-(-r // b), n_steps - done)
                Phi_x = input_features.transform(X_p[s : s + r], out=features[:r], work=work)
                state, ls = sgd_steps(state, Phi_x, Y_p[s : s + block], Phi_theta, k, config, rng)
                done += k
                loss_sum += ls
                if done >= n_steps:
                    break
            if done >= n_steps:
                break
    return state, done, loss_sum
