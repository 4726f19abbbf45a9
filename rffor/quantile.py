"""``QuantileFunctionRegressor``: the conditional quantile function τ ↦ q(x)(τ), learned for every level at once
(Infinite Task Learning, thesis 003 ch. 5; MATH.md §6).

A scalar target y_i is the constant curve y_i(θ) on Θ = [0, 1]; with a pinball loss over a grid of levels the
model of :class:`~rffor.FunctionalRegressor` becomes a quantile function. This estimator is that model plus what
quantiles need: a fixed intercept curve (a marginal quantile function of the targets, :mod:`rffor.levels`), the
non-crossing penalty of thesis Theorem 5.27 (:mod:`rffor.solvers.noncrossing` for the exact solvers,
:mod:`rffor.solvers.dsgd` for random features), the monotone rearrangement of the predictions, and a ``predict``
that takes levels. Solvers, model files and the rest are :class:`~rffor.FunctionalRegressor`'s.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._validation import check_levels, check_targets, check_X
from .estimator import FunctionalRegressor
from .kernels import Kernel
from .levels import LEVEL_SAMPLING, NormalOffset, level_grid
from .losses import Loss, Pinball
from .outputs import QuantileLevels
from .settings import DEFAULTS

__all__ = ["QuantileFunctionRegressor", "REARRANGEMENT_LEVELS"]

#: the size of the uniform grid on which :meth:`QuantileFunctionRegressor.predict` rearranges a quantile function
REARRANGEMENT_LEVELS = 1000

#: FunctionalRegressor parameters the quantile estimator has too, with the same meaning and validation
_SHARED = (
    "kernel_x", "lam", "solver", "tol", "max_iter", "rff_method", "n_features_x", "input_features", "output_features",
    "n_features_theta", "output_rank_tol", "batch_size", "n_epochs", "max_steps", "step_size", "local_steps",
    "n_partitions", "init", "precondition_rank", "dtype", "client", "scheduler_address", "security", "checkpoint",
    "resume", "random_state", "verbose",
)  # fmt: skip


class QuantileFunctionRegressor(FunctionalRegressor):
    """Conditional quantiles at every level τ ∈ (0, 1) at once, without crossings (MATH.md §6).

    The model is ``q(x)(τ) = b(τ) + h(x)(τ)`` with b a fixed marginal quantile function of the targets (or 0)
    and h in the vv-RKHS of ``k_X ⊗ k_Θ``, fitted by (P) with a pinball loss averaged over a grid of levels
    (the integral pinball loss), optionally plus the non-crossing penalty
    ``λ_nc (1/(n m)) Σ_i Σ_j (−∂_τ q(x_i)(θ_j))₊`` (thesis 003 Theorem 5.27, anchors at the training levels).

    Parameters
    ----------
    loss : Pinball, default Pinball()
        The pinball loss, its ε-insensitive version (``epsilon``) or its κ-smoothed version (``kappa``), in the
        units of the targets (:class:`rffor.losses.Pinball`).
    levels : int or array-like of shape (m,), default 50
        Training grid: ``m`` midpoints ``(j − ½)/m`` (the integral over all levels; thesis 003 §5.4.3 finds
        m ≈ √n enough), or strictly increasing levels in [0, 1] (joint quantile regression at those levels,
        seed 001). Predictions are available at any level either way.
    kernel_x : Kernel, default None
        Input kernel; None means the Gaussian kernel of the median heuristic, ``γ = 1 / (2 median_ij ‖x_i − x_j‖²)``,
        as in :class:`~rffor.FunctionalRegressor` (:func:`rffor.kernels.median_heuristic`).
    kernel_theta : Kernel, default None
        Kernel on the levels; None means ``Gaussian(gamma=10)``. The non-crossing penalty needs it C².
    lam : float, default 1e-3
        λ > 0 of (P). :class:`rffor.model_selection.QuantileFunctionRegressorCV` chooses it by cross-validation.
    noncrossing : float, default 0.0
        λ_nc ≥ 0 of the non-crossing penalty (0: none). Exact solvers: large values (≈ 10) make ``∂_τ q ≥ 0`` exact
        at the anchors (exact penalty) at the price of a dual twice as large. rff: a subgradient term of the steps at
        their levels; keep it small (measured: 0.1 stable with the automatic step on a wiggly model, 1 not).
    offset : {"normal", "none"}, default "normal"
        The intercept curve b: a normal quantile function fitted to the training targets by their median and
        interquartile range (smooth, so that it adds no crossings: :class:`rffor.levels.NormalOffset`), or 0.
    rearrange : bool, default True
        Monotone rearrangement of the predicted quantile function (Chernozhukov, Fernández-Val & Galichon 2010):
        ``predict`` sorts the model's values over a fine uniform grid spanning the training levels (and the
        requested levels) before reading the requested levels. A monotone model is returned unchanged at the
        requested levels, a crossing one is made monotone, and by their result its L^p distance to the true
        (monotone) quantile function does not increase. The default because it is cheap and always valid, while
        the penalty is soft (crossings remain away from the anchors) and costs training time;
        ``rearrange=False`` shows the model itself (what the crossing metric of the benchmarks measures).
    solver : {"auto", "admm", "apgd", "rff"}, default "auto"
        As in :class:`~rffor.FunctionalRegressor`: "admm"/"apgd" solve the exact dual (D_q) with a certified gap;
        "rff" the random-feature model by doubly stochastic steps that sample levels (``n_level_samples``).
    tol : float, default 1e-5
        Exact solvers: relative duality gap at which to stop.
    max_iter : int or None, default None
        Exact solvers: iteration cap (None: the solver's default).
    n_level_samples : int or None, default None
        rff: levels s drawn per DSGD step; None: 8. A step costs O(b·s·D_θ) for the residuals and gradients plus
        O(s·m·D_θ) for φ_Θ at the drawn levels (the Nyström extension of the exact factor reads k_Θ against the m
        grid levels; small next to the first term while m < b), instead of O(b·m·D_θ).
    level_sampling : {"uniform", "sobol", "gauss-legendre"}, default "uniform"
        rff: how a step draws its levels from μ (:func:`rffor.levels.draw_levels`) when ``levels`` is an int. With
        given levels (joint quantile regression) a step draws s of them, uniformly without replacement.
    rff_method, n_features_x, input_features, output_features, n_features_theta, output_rank_tol, batch_size, \
n_epochs, max_steps, step_size, local_steps, n_partitions, init, precondition_rank, dtype, client, \
scheduler_address, security, checkpoint, resume, random_state, verbose
        As in :class:`~rffor.FunctionalRegressor` (random-feature solver). ``rff_method="auto"`` is DSGD ("sgd")
        for the quantile losses; "mm" (full-batch passes) needs a smoothed loss (``Pinball(kappa > 0)``) and no
        non-crossing penalty.

    Attributes
    ----------
    levels_ : ndarray of shape (m,)
        The training grid (also ``theta_``).
    offset_ : NormalOffset or None
        The intercept curve b.
    anchors_ : ndarray of shape (m_nc,)
        Exact solvers: the anchor levels of the non-crossing penalty (empty without it).
    dual_coef_, duality_gap_, objective_, n_iter_, objective_history_, coef_
        As in :class:`~rffor.FunctionalRegressor` (the gap and objective include the penalty).

    Examples
    --------
    >>> import numpy as np
    >>> from rffor import QuantileFunctionRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 1, (200, 1)); y = np.sin(6 * X[:, 0]) + 0.3 * rng.standard_normal(200)
    >>> est = QuantileFunctionRegressor(levels=20, lam=1e-3).fit(X, y)
    >>> est.predict(X[:3], levels=[0.1, 0.5, 0.9]).shape
    (3, 3)
    >>> est.predict(X[:3]).shape  # the median
    (3,)
    """

    _parameter_constraints: dict = {
        **{k: FunctionalRegressor._parameter_constraints[k] for k in _SHARED},
        "loss": [Pinball, None],
        "levels": [Interval(numbers.Integral, 1, None, closed="left"), "array-like"],
        "kernel_theta": [Kernel, None],
        "lam": [Interval(numbers.Real, 0, None, closed="neither")],
        "noncrossing": [Interval(numbers.Real, 0, None, closed="left")],
        "offset": [StrOptions({"normal", "none"})],
        "rearrange": ["boolean"],
        "n_level_samples": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "level_sampling": [StrOptions(set(LEVEL_SAMPLING))],
    }

    # FunctionalRegressor settings that do not apply to quantile functions (read by its shared machinery)
    representation = "splines"
    n_eig = None
    init_reweight = 0  # the pinball losses offer no IRLS weights
    n_theta_samples = None
    loss_params = None  # λ selection on the random-feature path is for curves (lam="auto"): QuantileFunctionRegressorCV
    kernel_theta_params = None
    selection_rows = None

    def __init__(
        self,
        loss=None,
        *,
        levels=50,
        kernel_x=None,
        kernel_theta=None,
        lam=1e-3,
        noncrossing=0.0,
        offset="normal",
        rearrange=True,
        solver="auto",
        tol=1e-5,
        max_iter=None,
        n_level_samples=None,
        level_sampling="uniform",
        rff_method=DEFAULTS.rff_method,
        n_features_x=DEFAULTS.n_features_x,
        input_features=DEFAULTS.input_features,
        output_features=DEFAULTS.output_features,
        n_features_theta=DEFAULTS.n_features_theta,
        output_rank_tol=DEFAULTS.output_rank_tol,
        batch_size=DEFAULTS.batch_size,
        n_epochs=DEFAULTS.n_epochs,
        max_steps=None,
        step_size="auto",
        local_steps=None,
        n_partitions=None,
        init=DEFAULTS.init,
        precondition_rank=DEFAULTS.precondition_rank,
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
        self.levels = levels
        self.kernel_x = kernel_x
        self.kernel_theta = kernel_theta
        self.lam = lam
        self.noncrossing = noncrossing
        self.offset = offset
        self.rearrange = rearrange
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.n_level_samples = n_level_samples
        self.level_sampling = level_sampling
        self.rff_method = rff_method
        self.n_features_x = n_features_x
        self.input_features = input_features
        self.output_features = output_features
        self.n_features_theta = n_features_theta
        self.output_rank_tol = output_rank_tol
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.max_steps = max_steps
        self.step_size = step_size
        self.local_steps = local_steps
        self.n_partitions = n_partitions
        self.init = init
        self.precondition_rank = precondition_rank
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
        return Pinball() if self.loss is None else self.loss

    def _kernels(self, X: np.ndarray | None, theta: np.ndarray) -> tuple[Kernel | None, Kernel]:
        kx, _ = super()._kernels(X, theta)
        return kx, self.kernel_theta if self.kernel_theta is not None else QuantileLevels(theta).default_kernel()

    def _check_noncrossing_kernel(self, levels: np.ndarray) -> None:
        """The penalty reads ∂_θ k_Θ: refuse a kernel without derivatives before any work."""
        if self.noncrossing > 0:
            self._kernels(None, levels)[1].gram_derivatives(levels[:1], levels[:1])

    def _targets_on_grid(self, y: np.ndarray, levels: np.ndarray) -> np.ndarray:
        """``Y[i, j] = y_i − b(θ_j)``: the constant curves minus the intercept curve, shape (n, m)."""
        base = np.zeros(len(levels)) if self.offset_ is None else self.offset_(levels)
        return y[:, None] - base[None, :]

    # ---------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the quantile function.

        Parameters
        ----------
        X : array-like of shape (n, d), or a :class:`rffor.data.Dataset` with scalar targets (m = 1)
            Inputs; a Dataset (Zarr store) is fitted out of core with the random-feature solver (then y is None).
        y : array-like of shape (n,)
            Scalar targets (a column vector is accepted with scikit-learn's DataConversionWarning).

        Returns
        -------
        self
        """
        from .estimator import _is_dataset

        if _is_dataset(X):
            return self._fit_dataset(X, y)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: fit(X, y) with y of shape "
                "(n_samples,)"
            )
        X = check_X(X)
        y = check_targets(y, n_samples=X.shape[0])
        levels = level_grid(self.levels)
        loss = self._loss()
        self._check_noncrossing_kernel(levels)
        self.levels_ = self.theta_ = levels
        self.n_features_in_ = X.shape[1]
        self._y_1d = True
        self.solver_ = self._resolve_solver(X.shape[0], False)
        # k_X: the median heuristic's on the rows (drawn where the data is for random features, as a Dataset's)
        self.kernel_x_, self.kernel_theta_ = self._kernels(X if self.solver_ != "rff" else None, levels)
        self.loss_ = loss
        self.offset_ = NormalOffset.fit(y) if self.offset == "normal" else None
        if self.solver_ == "rff":
            from .chunked import ArrayData

            return self._fit_rff_quantiles(ArrayData(X, y[:, None]), levels)
        return self._fit_exact(X, self._targets_on_grid(y, levels), levels)

    def _fit_exact(self, X: np.ndarray, Y: np.ndarray, theta: np.ndarray):
        """The exact dual (D_q) on the level grid, with the penalty's derivative functionals when λ_nc > 0."""
        from .solvers.noncrossing import noncrossing_problem

        anchors = theta if self.noncrossing > 0 else np.empty(0)
        slope = None if self.offset_ is None else self.offset_.slope(anchors)
        problem = noncrossing_problem(
            self.kernel_x_.gram(X), Y, theta, self.kernel_theta_, self.lam, self.loss_,
            lam_nc=float(self.noncrossing), anchors=anchors, offset_slope=slope,
        )  # fmt: skip
        result = self._run_exact_solver(problem)
        self.objective_, self.duality_gap_ = float(self.objective_history_[-1]), result.gap
        self.anchors_ = anchors
        self._set_exact_model(X, problem.prediction_weights(result.coef), theta)
        return self

    def _fit_dataset(self, data, y):
        """Out of core: a chunked dataset of scalar targets (m = 1), random features; the offset is fitted on one
        pass over the targets (n floats)."""
        if y is not None:
            raise ValueError("fit(dataset) takes the targets from the dataset: pass y=None")
        if data.m != 1:
            raise ValueError(f"a quantile function needs scalar targets (m = 1), the dataset has m = {data.m}")
        self._resolve_solver(data.n, True)
        levels = level_grid(self.levels)
        self._check_noncrossing_kernel(levels)
        self.levels_ = self.theta_ = levels
        self.n_features_in_ = data.d
        self._y_1d = True
        self.kernel_x_, self.kernel_theta_ = self._kernels(None, levels)
        self.loss_ = self._loss()
        self.solver_ = "rff"
        if self.offset == "normal":
            y_all = np.concatenate([np.asarray(Y_i, dtype=np.float64)[:, 0] for _, _, Y_i in data.iter_chunks()])
            if not np.all(np.isfinite(y_all)):
                raise ValueError("the dataset's targets must be finite (no NaN): quantile regression needs them all")
            self.offset_ = NormalOffset.fit(y_all)
        else:
            self.offset_ = None
        return self._fit_rff_quantiles(data, levels)

    def _fit_rff_quantiles(self, data, levels):
        """Random features (MATH.md §5): DSGD steps that draw their levels from μ (``level_sampling``; among the
        given levels when ``levels`` is a list) on the scalar targets of ``data`` (a chunked dataset with m = 1),
        started from the square-loss closed form of the location-shifted targets ``y − b(½)`` on the level grid (the
        marginal quantile function moved by the conditional location, instead of a flat curve at the mean):
        the output space :class:`rffor.outputs.QuantileLevels` with the offset b."""
        if self.rff_method == "mm" and not self.loss_.is_smooth:
            raise ValueError(
                "rff_method='mm' majorises a smooth loss: use Pinball(kappa > 0) (the κ-smoothed pinball), or "
                "rff_method='sgd' / 'auto' (DSGD with sampled levels) for the plain pinball loss"
            )
        sampled = self.rff_method in ("auto", "sgd")
        # given levels are joint quantile regression at those levels (seed 001): steps draw among them, not from μ
        joint = not isinstance(self.levels, numbers.Integral)
        self._fit_rff(
            data,
            levels,
            outputs=QuantileLevels(levels, self.offset_),
            n_theta_samples=self.n_level_samples,
            level_sampling=("grid" if joint else self.level_sampling) if sampled else None,
            lam_nc=float(self.noncrossing),
        )
        return self

    def _output_columns(self, theta_new: np.ndarray) -> np.ndarray:
        from .solvers.noncrossing import output_columns

        return output_columns(self.kernel_theta_, self.theta_, self.anchors_, theta_new)

    def _output_size(self, m: int) -> int:
        return m + len(self.anchors_)

    # ------------------------------------------------------------------ predict
    def predict(self, X, levels=None):
        """Conditional quantiles.

        Parameters
        ----------
        X : array-like of shape (n_new, d)
        levels : float or array-like of shape (q,), default None
            Levels in [0, 1] (strictly increasing); None means the median, 0.5.

        Returns
        -------
        Q : ndarray of shape (n_new, q), or (n_new,) for a single level (a number or None), float64
            Monotone in the level when ``rearrange=True``.
        """
        check_is_fitted(self, "solver_")
        single = levels is None or np.ndim(levels) == 0
        tau = np.array([0.5]) if levels is None else check_levels(levels, allow_scalar=True)
        if self.rearrange:
            grid = np.union1d(self._rearrangement_grid(), tau)
            Q = np.sort(self.predict_raw(X, grid), axis=1)[:, np.searchsorted(grid, tau)]
        else:
            Q = self.predict_raw(X, tau)
        return Q[:, 0] if single else Q

    def _rearrangement_grid(self) -> np.ndarray:
        """The uniform grid of :data:`REARRANGEMENT_LEVELS` levels spanning the training levels: the model is
        rearranged where it was fitted (beyond, a Gaussian k_Θ pulls h back to 0 and the values are extrapolations,
        which sorting would otherwise mix into the fitted range)."""
        return np.linspace(self.levels_[0], self.levels_[-1], REARRANGEMENT_LEVELS)

    def predict_raw(self, X, levels) -> np.ndarray:
        """The model ``b(τ) + h(x)(τ)`` itself at the given levels, without rearrangement.

        Parameters
        ----------
        X : array-like of shape (n_new, d)
        levels : array-like of shape (q,)
            Any levels (they need not be increasing).

        Returns
        -------
        ndarray of shape (n_new, q), float64
        """
        tau = np.atleast_1d(np.asarray(levels, dtype=np.float64))
        Q = FunctionalRegressor.predict(self, X, theta=tau)
        if self.offset_ is not None:
            Q += self.offset_(tau)[None, :]
        return Q

    # ---------------------------------------------------------------- state
    def _get_fitted_state(self):
        fitted, arrays = super()._get_fitted_state()
        fitted["quantile"] = {"offset": self.offset_ is not None}
        if self.offset_ is not None:
            arrays["offset"] = self.offset_.to_array()
        if self.solver_ != "rff":
            arrays["anchors"] = self.anchors_
        return fitted, arrays

    def _set_fitted_state(self, fitted, arrays):
        q = fitted.get("quantile")
        if not isinstance(q, dict):
            raise ValueError("the quantile settings are missing")
        if fitted.get("solver") != "rff":
            anchors = arrays.get("anchors")
            if not (isinstance(anchors, np.ndarray) and anchors.ndim == 1):
                raise ValueError("anchors must be a 1-D array")
            self.anchors_ = anchors
        super()._set_fitted_state(fitted, arrays)
        self.levels_ = self.theta_
        self.offset_ = NormalOffset.from_array(arrays.get("offset")) if q.get("offset") else None

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        tags.target_tags.single_output = True
        return tags
