"""``FunctionalRegressor``: the scikit-learn estimator over the exact and random-feature solvers.

The estimator validates, picks a solver and stores the fitted state; the mathematics lives in
:mod:`rffor.solvers` (exact duals, MATH.md §3) and :mod:`rffor.solvers.rff` (random features, MATH.md §5).
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from ._validation import check_theta, check_X, check_Y
from .io import json_value
from .kernels import MEDIAN_HEURISTIC_ROWS, Kernel, median_heuristic
from .losses import Loss, Square
from .outputs import CurveGrid
from .settings import AUTO_EXACT_MAX_N, DEFAULTS, RFSettings, parameter_docs, sklearn_constraints
from .solvers import EXACT_SOLVERS, solver_default
from .solvers.dual import DualProblem, full_certificate

__all__ = ["FunctionalRegressor", "load", "RF_OPTIONS"]

#: the random-feature options (:class:`rffor.settings.RFSettings`) that FunctionalRegressor takes as parameters, with
#: the settings' defaults, constraints and documentation
RF_OPTIONS = (
    "lam", "loss_params", "kernel_theta_params", "selection_rows", "rff_method", "n_features_x", "max_features_x",
    "input_features", "output_features", "n_features_theta", "output_rank_tol", "batch_size", "n_epochs", "max_steps",
    "n_theta_samples", "step_size", "local_steps", "n_partitions", "partitions_per", "init", "init_reweight",
    "precondition_rank",
    "dtype",
)  # fmt: skip

#: parameters describing where and how a fit ran, not the model: reset to their defaults in a saved model
_RUNTIME_PARAMS = ("client", "security", "scheduler_address", "checkpoint", "resume")

#: estimator classes that model files can name (:func:`load`); subclasses register themselves
_ESTIMATORS: dict[str, type] = {}


def _is_dataset(obj) -> bool:
    """Whether ``obj`` is a chunked dataset (:mod:`rffor.chunked`: a Zarr store, in-memory chunks, …)."""
    from .chunked import PROTOCOL

    return all(hasattr(obj, a) for a in PROTOCOL)


class FunctionalRegressor(RegressorMixin, BaseEstimator):
    """Function-valued regression ``x ↦ y(·)`` in the vector-valued RKHS of ``k_X ⊗ k_Θ`` (MATH.md (P)).

    Parameters
    ----------
    loss : Loss, default Square()
        ``Square()``, ``Huber(kappa, p)`` with p in {1, 2}, ``EpsilonInsensitive(epsilon, p)`` with p in {2, inf}
        (MATH.md §2; κ and ε are in the units of the outputs).
    kernel_x : Kernel, default None
        Input kernel k_X; None means the Gaussian kernel of the median heuristic,
        ``γ = 1 / (2 median_ij ‖x_i − x_j‖²)`` over up to 1000 training rows (:func:`rffor.kernels.median_heuristic`:
        evenly spaced rows for the exact solvers, rows drawn with ``random_state`` for rff), so that inputs in any
        units are neither over- nor under-smoothed; the kernel used is ``kernel_x_``.
    kernel_theta : Kernel, default None
        Output kernel k_Θ on the grid; None means ``Gaussian(gamma=100/(θ_max − θ_min)²)``.
    solver : {"auto", "admm", "apgd", "rff"}, default "auto"
        "admm" and "apgd" solve the exact dual (MATH.md §3.1b, §3.1); "rff" the random-feature model (§5).
        "auto" picks "admm" for in-memory data with n <= 5000 curves and "rff" otherwise (or for a Dataset).
    representation : {"splines", "eigen"}, default "splines"
        Exact solvers: linear-spline dual (D_s, every loss) or eigenbasis dual (D_e, square / H_κ^2 / ℓ_ε^2).
    n_eig : int or None, default None
        Eigen representation: number r of eigenpairs of K_Θ kept (None: all, r = m).
    tol : float, default 1e-6
        Exact solvers: stop at this relative duality gap. rff with MM passes: stop when the majorizer promises a
        decrease below ``tol · J`` (:mod:`rffor.solvers.mm`).
    max_iter : int or None, default None
        Exact solvers: iteration cap (None: the solver's default, :data:`rffor.solvers.EXACT_SOLVERS`: 2000 for
        ADMM, 20000 for APGD); reaching it warns. rff with MM passes: at most this many passes (None: 300);
        reaching it warns too.
    <random-feature options>
    client : distributed.Client or None, default None
        rff: run training on this Dask cluster (left open). See :mod:`rffor.executor.dask`.
    scheduler_address : str or None, default None
        rff: connect to this Dask scheduler (``tcp://host:port`` or ``tls://…``) for the fit; an unreachable
        scheduler raises :class:`rffor.executor.SchedulerUnreachableError` after ``rffor.connect-timeout`` (30 s).
    security : distributed.Security or None, default None
        TLS settings passed to the Dask client (``cluster/tls/README.md``).
    checkpoint : str or None, default None
        rff: path of a checkpoint written atomically after every round of DSGD (``.npz``, no pickle; a
        closed-form-only fit writes none). A failed fit leaves the last good one.
    resume : bool, default False
        rff: continue from ``checkpoint`` if it exists; the result equals the uninterrupted fit bit for bit.
    random_state : int, numpy Generator or None, default None
        Seed of the random features and of DSGD; a fixed value gives identical models.
    verbose : int, default 0
        Progress messages (0: none).

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n, m) or (n, r)
        Exact solvers: the dual coefficients A of (D_s) or (D_e).
    coef_ : ndarray of shape (D_x, D_θ)
        rff: the matrix B of (P_rf).
    n_iter_ : int
        At least 1: exact solvers, iterations (the closed-form start counts as one when it already meets ``tol``);
        rff, 1 for the closed form, MM passes of the final fit, or DSGD steps per partition.
    objective_ : float
        Exact solvers: the objective of (P) at the returned model (the one ``predict`` uses).
    duality_gap_ : float
        Exact solvers: relative duality gap of (P) at the returned model: ``(P(h) − D) / max(|P(h)|, |D|)`` with D
        a dual bound, so ``P(h) − P* ≤ duality_gap_ · max(|P(h)|, |D|)``. With ``representation="eigen"`` and
        r < m it includes the error of keeping r eigenpairs (:func:`rffor.solvers.dual.full_certificate`).
    reduced_duality_gap_ : float
        ``representation="eigen"`` only: the solver's gap of the reduced problem (D_e), what ``tol`` stops on.
    objective_history_ : ndarray
        The solver's primal objective at each duality-gap evaluation (exact: the start, then every iteration for
        ADMM and every 10 iterations and the last one for APGD; with ``representation="eigen"``, of the reduced
        problem, which equals (P) only when r = m) or per round (rff).
    theta_ : ndarray of shape (m,)
        Training grid.
    loss_ : Loss
        The loss of the fitted model (with its selected κ or ε when ``loss_params`` is set).
    lam_ : float
        rff: the λ of the model (the selected one with ``lam="auto"``).
    kernel_x_, kernel_theta_ : Kernel
        The kernels of the model: ``kernel_x`` or the median heuristic's; ``kernel_theta`` or its default, or the
        one selected with ``kernel_theta_params``.
    lam_path_ : dict or None
        rff with ``lam="auto"``: every candidate of the selection (λ, κ/ε, held-out score, objective, passes) and
        the walks made (:meth:`rffor.solvers.selection.Selection.to_dict`).
    warm_coef_ : ndarray of shape (D_x, D_θ) or None
        rff with MM passes: the model the final fit started from (the square-loss closed form, or with
        ``lam="auto"`` the selected candidate, fitted on the selection's training curves), to compare with
        ``coef_``. Not saved in model files.
    n_features_x_ : int
        rff: D_x of the fitted model (Nyström: the number of centres M), the number ``n_features_x="auto"``
        resolved to for the training curves.
    n_features_in_ : int

    Examples
    --------
    >>> from rffor import FunctionalRegressor
    >>> from rffor.losses import Huber
    >>> from rffor.datasets import make_synthetic
    >>> data = make_synthetic(50, 10, random_state=0)
    >>> est = FunctionalRegressor(Huber(kappa=0.1, p=2), lam=1e-3).fit(data.X_train, data.Y_train)
    >>> est.predict(data.X_test).shape
    (10, 100)
    """

    _parameter_constraints: dict = {
        "loss": [Loss, None],
        "kernel_x": [Kernel, None],
        "kernel_theta": [Kernel, None],
        **sklearn_constraints(RF_OPTIONS),
        "solver": [StrOptions({"auto", "rff", *EXACT_SOLVERS})],
        "representation": [StrOptions({"splines", "eigen"})],
        "n_eig": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "tol": [Interval(numbers.Real, 0, None, closed="left")],
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "client": "no_validation",
        "scheduler_address": [str, None],
        "security": "no_validation",
        "checkpoint": [str, HasMethods(["__fspath__"]), None],
        "resume": ["boolean"],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        loss=None,
        *,
        kernel_x=None,
        kernel_theta=None,
        lam=DEFAULTS.lam,
        loss_params=DEFAULTS.loss_params,
        kernel_theta_params=DEFAULTS.kernel_theta_params,
        selection_rows=DEFAULTS.selection_rows,
        solver="auto",
        representation="splines",
        n_eig=None,
        tol=DEFAULTS.tol,
        max_iter=None,
        rff_method=DEFAULTS.rff_method,
        n_features_x=DEFAULTS.n_features_x,
        max_features_x=DEFAULTS.max_features_x,
        input_features=DEFAULTS.input_features,
        output_features=DEFAULTS.output_features,
        n_features_theta=DEFAULTS.n_features_theta,
        output_rank_tol=DEFAULTS.output_rank_tol,
        batch_size=DEFAULTS.batch_size,
        n_epochs=DEFAULTS.n_epochs,
        max_steps=DEFAULTS.max_steps,
        n_theta_samples=DEFAULTS.n_theta_samples,
        step_size=DEFAULTS.step_size,
        local_steps=DEFAULTS.local_steps,
        n_partitions=DEFAULTS.n_partitions,
        partitions_per=DEFAULTS.partitions_per,
        init=DEFAULTS.init,
        init_reweight=DEFAULTS.init_reweight,
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
        self.kernel_x = kernel_x
        self.kernel_theta = kernel_theta
        self.lam = lam
        self.loss_params = loss_params
        self.kernel_theta_params = kernel_theta_params
        self.selection_rows = selection_rows
        self.solver = solver
        self.representation = representation
        self.n_eig = n_eig
        self.tol = tol
        self.max_iter = max_iter
        self.rff_method = rff_method
        self.n_features_x = n_features_x
        self.max_features_x = max_features_x
        self.input_features = input_features
        self.output_features = output_features
        self.n_features_theta = n_features_theta
        self.output_rank_tol = output_rank_tol
        self.batch_size = batch_size
        self.n_epochs = n_epochs
        self.max_steps = max_steps
        self.n_theta_samples = n_theta_samples
        self.step_size = step_size
        self.local_steps = local_steps
        self.n_partitions = n_partitions
        self.partitions_per = partitions_per
        self.init = init
        self.init_reweight = init_reweight
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
        return Square() if self.loss is None else self.loss

    def _kernels(self, X: np.ndarray | None, theta: np.ndarray) -> tuple[Kernel | None, Kernel]:
        """k_X and k_Θ of a fit. With ``kernel_x=None``, k_X is the median heuristic's on up to
        :data:`~rffor.kernels.MEDIAN_HEURISTIC_ROWS` evenly spaced rows of X, or None when X is None (the
        random-feature fit then draws the rows where the data is)."""
        if self.kernel_x is not None:
            kx = self.kernel_x
        elif X is None:
            kx = None
        else:
            rows = np.linspace(0, X.shape[0] - 1, min(X.shape[0], MEDIAN_HEURISTIC_ROWS)).astype(int)
            kx = median_heuristic(X[np.unique(rows)])
        kt = self.kernel_theta if self.kernel_theta is not None else CurveGrid(theta).default_kernel()
        return kx, kt

    @classmethod
    def _param_from_spec(cls, name: str, value: dict):
        """A constructor parameter saved as a spec (:func:`_params_for_save`) rebuilt for :func:`load`: the loss and
        the kernels (``kernel_*``); a subclass with other spec-valued parameters extends it."""
        from .kernels import kernel_from_spec
        from .losses import loss_from_spec

        if name == "loss":
            return loss_from_spec(value)
        if name.startswith("kernel"):
            return kernel_from_spec(value)
        return value

    def _resolve_solver(self, n: int, is_dataset: bool) -> str:
        """The solver ``solver`` means for n rows (in memory or a Dataset) and the loss: "auto" is an exact
        solver up to ``AUTO_EXACT_MAX_N`` rows of a convex loss, the random-feature path otherwise."""
        loss = self._loss()
        if self.solver == "auto":
            return "rff" if is_dataset or n > AUTO_EXACT_MAX_N or not loss.has_dual else "admm"
        if self.solver != "rff" and not loss.has_dual:
            raise ValueError(
                f"solver={self.solver!r} solves the dual of a convex loss; loss={loss!r} has none: use "
                "solver='rff' (or 'auto')"
            )
        if is_dataset and self.solver != "rff":
            raise ValueError(
                f"solver={self.solver!r} needs the data in memory; a Zarr Dataset is fitted out of core with "
                "solver='rff' (or 'auto')"
            )
        return self.solver

    # ---------------------------------------------------------------------- fit
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, theta=None):
        """Fit the model.

        Parameters
        ----------
        X : array-like of shape (n, d), or a :class:`rffor.data.Dataset`
            Inputs (a function-valued input is its vector of values on its grid). A Dataset (Zarr store) is
            fitted out of core with the random-feature solver; then Y and theta must be None.
        y : array-like of shape (n, m)
            Output curves on the grid ``theta`` (the target, named as in every scikit-learn regressor; 2-D for
            curves, as a multi-output target); NaN marks a missing value.
        theta : array-like of shape (m,), default None
            Strictly increasing output grid; None means ``linspace(0, 1, m)``.

        Returns
        -------
        self
        """
        if _is_dataset(X):
            if y is not None or theta is not None:
                raise ValueError(
                    "fit(dataset) takes the outputs and the grid from the dataset: pass y=None, theta=None"
                )
            self.loss_ = self._loss()
            self._resolve_solver(X.n, True)
            self.solver_ = "rff"
            theta = np.asarray(X.theta, dtype=np.float64)
            self.theta_ = theta
            self.n_features_in_ = X.d
            self._y_1d = False
            self.kernel_x_, self.kernel_theta_ = self._kernels(None, theta)
            return self._fit_rff(X, theta)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: "
                "fit(X, y, theta=None) with y of shape (n_samples, n_locations)"
            )
        X = check_X(X)
        Y_in = y
        Y = check_Y(y, n_samples=X.shape[0], name="y")
        self._y_1d = np.ndim(np.asarray(Y_in)) == 1
        theta = check_theta(theta, Y.shape[1])
        self.theta_ = theta
        self.n_features_in_ = X.shape[1]
        self.loss_ = self._loss()
        self.solver_ = self._resolve_solver(X.shape[0], False)
        self.kernel_x_, self.kernel_theta_ = self._kernels(X if self.solver_ != "rff" else None, theta)
        if self.solver_ != "rff" and not isinstance(self.lam, str):
            if self.loss_params is not None:
                raise ValueError(
                    f"loss_params={self.loss_params!r} is chosen with lam='auto' on the random-feature path "
                    f"(solver='rff'); for solver={self.solver_!r} use rffor.model_selection.FunctionalRegressorCV"
                )
            if self.kernel_theta_params is not None:
                raise ValueError(
                    f"kernel_theta_params={self.kernel_theta_params!r}: the output kernel's γ is chosen only on the "
                    f"random-feature path (solver='rff', lam='auto'); for solver={self.solver_!r} set kernel_theta "
                    "(FunctionalRegressorCV searches λ and κ/ε, not k_Θ)"
                )
        if isinstance(self.lam, str) and self.solver_ != "rff":
            raise ValueError(
                f"lam='auto' selects λ on the random-feature path (solver='rff'); solver={self.solver_!r} needs a "
                "number: use rffor.model_selection.FunctionalRegressorCV to choose it by cross-validation"
            )
        if self.solver_ == "rff":
            from .chunked import ArrayData

            return self._fit_rff(ArrayData(X, Y, theta), theta)
        return self._fit_exact(X, Y, theta)

    def _fit_exact(self, X: np.ndarray, Y: np.ndarray, theta: np.ndarray):
        n, m = Y.shape
        loss = self.loss_
        # every check before any work (DESIGN.md, "Errors users should get")
        r = m if self.n_eig is None else self.n_eig
        if self.representation == "eigen":
            if r > m:
                raise ValueError(f"n_eig={r} exceeds the number of grid locations m={m}")
            if not loss.supports_eigen:
                raise ValueError(
                    f"representation='eigen' supports Square, Huber(p=2) and EpsilonInsensitive(p=2), not {loss!r}"
                )
        K_x = self.kernel_x_.gram(X)
        K_theta = self.kernel_theta_.gram(theta)
        Y_full = CurveGrid(theta).fill(Y)  # the curves' missing-value rule: interpolated along θ (MATH.md §3.3)
        if self.representation == "eigen":
            problem = DualProblem.eigenbasis(K_x, K_theta, Y_full, self.lam, loss, r)
        else:
            problem = DualProblem.splines(K_x, K_theta, Y_full, self.lam, loss, theta=theta)
        result = self._run_exact_solver(problem)
        if problem.eigen:  # certify the returned model for (P), not the reduced problem only
            self.objective_, _, self.duality_gap_ = full_certificate(problem, result.coef, K_theta)
            self.reduced_duality_gap_ = result.gap
        else:
            self.objective_, self.duality_gap_ = float(self.objective_history_[-1]), result.gap
        self._set_exact_model(X, problem.prediction_weights(result.coef), theta)
        return self

    def _run_exact_solver(self, problem: DualProblem):
        """Solve an exact dual with the estimator's solver, tolerance, iteration cap and progress messages; sets
        ``dual_coef_``, ``n_iter_`` and ``objective_history_`` and returns the solver's result."""
        callback = None
        if self.verbose:

            def callback(it, A, gap):
                if it % max(1, int(self.verbose) * 10) == 0:
                    print(f"[rffor {self.solver_}] iteration {it}: relative gap {gap:.3e}", flush=True)

        solve = EXACT_SOLVERS[self.solver_]
        max_iter = solver_default(self.solver_, "max_iter") if self.max_iter is None else self.max_iter
        result = solve(problem, tol=self.tol, max_iter=max_iter, callback=callback)
        self.dual_coef_ = result.coef
        self.n_iter_ = max(1, int(result.n_iter))
        self.objective_history_ = np.asarray(result.history["primal"])
        return result

    def _output_columns(self, theta_new: np.ndarray) -> np.ndarray:
        """The output side of an exact model's prediction ``K_X(X_new, X) W G(θ_new)``: ``G = K_Θ(grid, θ_new)``."""
        return self.kernel_theta_.gram(self.theta_, theta_new)

    def _set_exact_model(self, X: np.ndarray, W: np.ndarray, theta: np.ndarray) -> None:
        """Store the training inputs and the prediction weights W (and W G on the training grid)."""
        self.X_fit_ = X
        self._W = W
        self._W_grid = W @ self._output_columns(theta)

    def _executor(self, data):
        """The executor this estimator's parameters choose for ``data`` (:func:`rffor.executor.make_executor`: Dask
        for a client, a scheduler address, several partitions or a multi-chunk store; this process otherwise)."""
        from .executor import make_executor

        return make_executor(
            data,
            client=self.client,
            scheduler_address=self.scheduler_address,
            security=self.security,
            n_partitions=self.n_partitions,
        )

    def _fit_rff(self, data, theta, outputs=None, executor=None, **extra):
        """Random-feature fit (MATH.md §5): :func:`rffor.solvers.rff.fit_rff` with the settings of this estimator's
        parameters (:meth:`rffor.settings.RFSettings.from_params`; ``max_iter`` is the MM pass budget), on
        ``executor`` (default: the one the parameters choose, :meth:`_executor`). ``data`` is a chunked dataset
        (:mod:`rffor.chunked`), ``outputs`` its output space (default: curves on ``theta``); ``extra`` options
        replace the estimator's."""
        from .solvers.rff import fit_rff

        executor = self._executor(data) if executor is None else executor
        settings = RFSettings.from_params({**self.get_params(deep=False), **extra}, max_passes="max_iter")
        result = fit_rff(
            data,
            loss=self.loss_,
            kernel_x=self.kernel_x_,
            kernel_theta=self.kernel_theta_,
            outputs=outputs,
            settings=settings,
            random_state=self.random_state,
            executor=executor,
            checkpoint=self.checkpoint,
            resume=self.resume,
            verbose=self.verbose,
        )
        self.coef_ = result.coef
        self.input_features_ = result.input_features
        self.output_features_ = result.output_features
        self.random_state_ = result.random_state
        self.n_iter_ = max(1, int(result.n_iter))
        self.objective_history_ = result.objective_history
        self.rff_history_ = result.history
        self.rff_method_ = result.method
        self.lam_ = float(result.lam)
        self.warm_coef_ = result.warm_coef
        self.loss_ = result.loss
        self.kernel_x_ = result.kernel_x
        self.kernel_theta_ = result.kernel_theta
        self.lam_path_ = None if result.path is None else result.path.to_dict()
        self._Phi_theta_grid = result.output_features.transform(theta)
        return self

    @property
    def n_features_x_(self) -> int:
        """rff: D_x of the fitted model (Nyström: M), what ``n_features_x="auto"`` resolved to."""
        if not hasattr(self, "input_features_"):
            raise AttributeError("n_features_x_ exists after a random-feature fit (solver='rff')")
        return int(self.input_features_.n_features)

    # ------------------------------------------------------------------ predict
    def predict(self, X, theta=None):
        """Predict output curves.

        Parameters
        ----------
        X : array-like of shape (n_new, d)
        theta : array-like of shape (m_new,), default None
            Locations on Θ where to evaluate the curves; None means the training grid.

        Returns
        -------
        Y_hat : ndarray of shape (n_new, m_new) (or (n_new,) when fitted on 1-D y), float64
        """
        check_is_fitted(self, "solver_")
        X = check_X(X, n_features=self.n_features_in_, owner=type(self).__name__)
        theta_new = None if theta is None else self._check_theta_new(theta)
        if self.solver_ == "rff":  # computed in the fit's dtype, returned as float64 like every regressor's
            Y_hat = np.asarray(self._predict_rff(X, theta_new), dtype=np.float64)
        else:
            K_new = self.kernel_x_.gram(X, self.X_fit_)
            if theta_new is None:
                Y_hat = K_new @ self._W_grid
            else:
                Y_hat = K_new @ (self._W @ self._output_columns(theta_new))
        if self._y_1d and theta is None:
            return Y_hat[:, 0]
        return Y_hat

    def _predict_rff(self, X, theta_new):
        from .solvers.prediction import predict

        Phi_theta = self._Phi_theta_grid if theta_new is None else self.output_features_.transform(theta_new)
        phi = self.input_features_
        if hasattr(phi, "astype") and phi.dtype != np.float64:
            phi = phi.astype(np.float64)  # float64 predictions, the same whatever the batch (scikit-learn contract)
        coef = np.asarray(self.coef_, dtype=np.float64)
        return predict(coef, phi, np.asarray(Phi_theta, dtype=np.float64), X)

    @staticmethod
    def _check_theta_new(theta) -> np.ndarray:
        theta = np.asarray(theta, dtype=np.float64)
        if theta.ndim == 0:
            theta = theta[None]
        if theta.ndim != 1 or not np.all(np.isfinite(theta)):
            raise ValueError(f"theta must be a finite 1-D array of locations, got shape {theta.shape}")
        return theta

    def score(self, X, y, sample_weight=None):
        """R² over observed entries: per-location R² (NaN entries of y ignored), averaged uniformly.

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n, m), NaN = not observed
        sample_weight : array-like of shape (n,), optional

        Returns
        -------
        score : float
        """
        from .metrics import r2_score

        return r2_score(y, self.predict(X), sample_weight)

    # ---------------------------------------------------------------- state
    def _get_fitted_state(self) -> tuple[dict, dict[str, np.ndarray]]:
        """What ``fit`` learned: a JSON-serialisable dict and named arrays (the model file of :meth:`save`).

        Exact solvers store ``theta``, ``x_fit``, ``dual_coef`` and the prediction weights ``w``, ``w_grid`` (so
        that ``predict`` is the same computation as before saving); random features store ``theta``, ``coef`` (B),
        ``phi_theta_grid`` and the feature maps' own states (``input_*``, ``output_*``; see
        :func:`rffor.features.feature_map_from_state`).
        """
        check_is_fitted(self, "solver_")
        gap = getattr(self, "duality_gap_", None)
        fitted = {
            "solver": self.solver_,
            "loss": self.loss_.to_spec(),
            "kernel_x": self.kernel_x_.to_spec(),
            "kernel_theta": self.kernel_theta_.to_spec(),
            "n_features_in": int(self.n_features_in_),
            "y_1d": bool(self._y_1d),
            "n_iter": int(self.n_iter_),
            "duality_gap": None if gap is None else float(gap),
            "objective": None if getattr(self, "objective_", None) is None else float(self.objective_),
            "reduced_duality_gap": getattr(self, "reduced_duality_gap_", None),
        }
        arrays = {"theta": self.theta_, "objective_history": np.asarray(self.objective_history_, dtype=np.float64)}
        if self.solver_ != "rff":
            fitted["solver_state"] = {}
            arrays.update(x_fit=self.X_fit_, dual_coef=self.dual_coef_, w=self._W, w_grid=self._W_grid)
            return fitted, arrays
        spec_in, arrays_in = self.input_features_.get_state()
        spec_out, arrays_out = self.output_features_.get_state()
        arrays.update(coef=self.coef_, phi_theta_grid=self._Phi_theta_grid)
        arrays.update({f"input_{k}": v for k, v in arrays_in.items()})
        arrays.update({f"output_{k}": v for k, v in arrays_out.items()})
        history = getattr(self, "rff_history_", None)
        fitted["solver_state"] = {
            "input_features": spec_in,
            "output_features": spec_out,
            "random_state": int(self.random_state_),
            "method": self.rff_method_,
            "lam": float(self.lam_),
            "lam_path": getattr(self, "lam_path_", None),
            "history": history if json_value(history) else None,
        }
        return fitted, arrays

    def _set_fitted_state(self, fitted: dict, arrays: dict[str, np.ndarray]) -> None:
        """Inverse of :meth:`_get_fitted_state`; raises ValueError naming what is inconsistent."""
        from .features import feature_map_from_state
        from .kernels import kernel_from_spec
        from .losses import loss_from_spec

        solver = fitted.get("solver")
        if solver != "rff" and solver not in EXACT_SOLVERS:
            raise ValueError(f"unknown solver {solver!r}")
        d = fitted.get("n_features_in")
        if isinstance(d, bool) or not isinstance(d, int) or d < 1:
            raise ValueError(f"n_features_in must be a positive integer, got {d!r}")
        theta = _saved_array(arrays, "theta")
        if not (theta.ndim == 1 and theta.size >= 1 and np.all(np.isfinite(theta))):
            raise ValueError("theta is not a finite grid")
        self.solver_ = solver
        self.loss_ = loss_from_spec(fitted["loss"])
        self.kernel_x_ = kernel_from_spec(fitted["kernel_x"])
        self.kernel_theta_ = kernel_from_spec(fitted["kernel_theta"])
        self.n_features_in_ = d
        self._y_1d = bool(fitted.get("y_1d", False))
        self.n_iter_ = int(fitted["n_iter"])
        if fitted.get("duality_gap") is not None:
            self.duality_gap_ = float(fitted["duality_gap"])
        if fitted.get("objective") is not None:
            self.objective_ = float(fitted["objective"])
        if fitted.get("reduced_duality_gap") is not None:
            self.reduced_duality_gap_ = float(fitted["reduced_duality_gap"])
        self.theta_ = theta
        self.objective_history_ = _saved_array(arrays, "objective_history")
        m = theta.shape[0]
        if solver != "rff":
            X_fit, W, W_grid = (_saved_array(arrays, k) for k in ("x_fit", "w", "w_grid"))
            if not (X_fit.ndim == 2 and X_fit.shape[1] == d):
                raise ValueError("x_fit does not have n_features_in columns")
            n = X_fit.shape[0]
            if W.shape != (n, self._output_size(m)) or W_grid.shape != (n, m):
                raise ValueError("the prediction weights do not match (n, m)")
            A = _saved_array(arrays, "dual_coef")
            if not (A.ndim == 2 and A.shape[0] == n):
                raise ValueError("dual_coef has a wrong shape")
            self.X_fit_, self.dual_coef_, self._W, self._W_grid = X_fit, A, W, W_grid
            return
        state = fitted.get("solver_state") or {}
        spec_in, spec_out = state.get("input_features"), state.get("output_features")
        if not (isinstance(spec_in, dict) and isinstance(spec_out, dict)):
            raise ValueError("the feature maps are not described")
        inp = feature_map_from_state(spec_in, {k[6:]: v for k, v in arrays.items() if k.startswith("input_")})
        out = feature_map_from_state(spec_out, {k[7:]: v for k, v in arrays.items() if k.startswith("output_")})
        if getattr(inp, "dim", d) != d:
            raise ValueError("the input feature map does not match n_features_in")
        coef, phi = _saved_array(arrays, "coef"), _saved_array(arrays, "phi_theta_grid")
        if coef.shape != (inp.n_features, out.n_features):
            raise ValueError(f"coef has shape {coef.shape}, expected {(inp.n_features, out.n_features)}")
        if phi.shape != (m, out.n_features):
            raise ValueError("phi_theta_grid does not match the grid and features")
        rs = state.get("random_state")
        if isinstance(rs, bool) or not isinstance(rs, int):
            raise ValueError("random_state must be an integer")
        self.coef_, self.input_features_, self.output_features_ = coef, inp, out
        self._Phi_theta_grid = phi
        self.random_state_ = rs
        self.rff_method_ = state.get("method")
        self.rff_history_ = state.get("history")
        lam = state.get("lam")
        if lam is not None:
            self.lam_ = float(lam)
        self.lam_path_ = state.get("lam_path")

    def _output_size(self, m: int) -> int:
        """Columns of the prediction weights W of an exact model on a grid of m locations (m here)."""
        return m

    def save(self, path, *, format: str | None = None) -> str:  # noqa: A002
        """Save the fitted model without pickle; :func:`rffor.load` reads it back.

        The file is the container of :mod:`rffor.io` (JSON metadata + ``.npy`` arrays, zip or directory, written
        atomically) holding the constructor parameters (runtime ones such as ``client`` or ``checkpoint`` are
        reset and listed under ``not_saved``) and :meth:`_get_fitted_state`.

        Parameters
        ----------
        path : str or os.PathLike
            Destination, e.g. ``"model.rffor"``.
        format : {"zip", "directory"} or None, default None
            See :func:`rffor.io.write`.

        Returns
        -------
        path : str
        """
        from .io import write

        fitted, arrays = self._get_fitted_state()
        params, not_saved = _params_for_save(self)
        meta = {"estimator": type(self).__name__, "params": params, "not_saved": not_saved, "fitted": fitted}
        return write(path, meta, arrays, format=format)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _ESTIMATORS[cls.__name__] = cls

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags


# ------------------------------------------------------------------------------------------------- model files
def _saved_array(arrays: dict[str, np.ndarray], name: str) -> np.ndarray:
    if name not in arrays:
        raise ValueError(f"array {name!r} is missing")
    return arrays[name]


def _params_for_save(est) -> tuple[dict, list[str]]:
    """The constructor parameters as JSON (losses and kernels as specs) and the names of those not saved."""
    params, not_saved = {}, []
    for name, value in est.get_params(deep=False).items():
        if name in _RUNTIME_PARAMS:
            if value is not None and value is not False:
                not_saved.append(name)
        elif hasattr(value, "to_spec"):
            params[name] = value.to_spec()
        elif name == "random_state" and not (
            value is None or (isinstance(value, numbers.Integral) and not isinstance(value, bool))
        ):
            not_saved.append(name)
            params[name] = None
        elif json_value(value):
            params[name] = value.item() if isinstance(value, np.generic) else value
        else:
            not_saved.append(name)
    return params, not_saved


def _params_from_saved(cls, params: dict) -> dict:
    known = cls().get_params(deep=False)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown estimator parameters {unknown}")
    params = dict(params)
    for name, value in params.items():
        if isinstance(value, dict):
            params[name] = cls._param_from_spec(name, value)
    return params


def load(path):
    """Load a model saved by ``save`` (:class:`FunctionalRegressor` or another rffor estimator).

    Nothing in the file can execute code: JSON metadata and ``.npy`` arrays read with ``allow_pickle=False``
    (:func:`rffor.io.read` checks the container); the estimator class named in the file rebuilds itself from it.

    Parameters
    ----------
    path : str or os.PathLike
        A zip file or a directory written by ``save``.

    Returns
    -------
    estimator
        Fitted; predicts exactly as the saved estimator did.

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``.
    ValueError
        ``path`` is not an rffor model, has another format version, or is truncated or corrupted.
    """
    import os

    from .io import read

    path = os.fspath(path)
    meta, arrays = read(path)
    try:
        cls = _ESTIMATORS.get(meta.get("estimator"))
        if cls is None:
            raise ValueError(f"unknown estimator {meta.get('estimator')!r}")
        for key in ("params", "fitted"):
            if not isinstance(meta.get(key), dict):
                raise ValueError(f"metadata field {key!r} is missing or not an object")
        est = cls(**_params_from_saved(cls, meta["params"]))
        est._set_fitted_state(meta["fitted"], arrays)
    except ValueError as exc:
        raise ValueError(f"{path!r} is corrupted: {exc}") from None
    except (TypeError, KeyError, IndexError, AttributeError) as exc:
        raise ValueError(f"{path!r} is corrupted: inconsistent model state ({type(exc).__name__}: {exc})") from None
    return est


_ESTIMATORS[FunctionalRegressor.__name__] = FunctionalRegressor
FunctionalRegressor.__doc__ = FunctionalRegressor.__doc__.replace(
    "    <random-feature options>\n", parameter_docs(RF_OPTIONS) + "\n"
)
