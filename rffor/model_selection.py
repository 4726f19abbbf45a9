"""Cross-validated choice of λ (and κ or ε) for the exact solvers, reusing work along the path.

:class:`FunctionalRegressorCV` is to :class:`~rffor.FunctionalRegressor` what scikit-learn's ``RidgeCV`` is to
``Ridge``. For each fold it computes the eigendecomposition of the fold's K_X once (and of K_Θ once for all folds):
the duals (D_s) of every λ and every loss parameter share them (MATH.md §3.1: λ enters only through the scalar
``c = 1/(λnm)``), and the robust losses are solved from the largest λ down, each ADMM/APGD solve warm-started at the
previous λ's dual solution. A candidate's fold score is the **midmean** (the mean of the middle half,
:func:`rffor.edge_rule.held_out_statistic`) over the fold's validation curves of their MSE for a robust loss (as
with paper 000 §5.1's median, outlying validation curves do not reward fitting outliers), the mean for the square
loss; the candidate with the lowest mean fold score wins, under the project's edge rule
(:func:`rffor.edge_rule.select_widening`): a λ or loss parameter selected at an end of its grid extends that grid by
one more value past it (λ by the grid's own ratio, decades by default), until the selection is interior, the score
flat past the edge (an extension improved it by less than 1%) or ``max_extensions`` extensions were made on that side
(``at_edge_`` then says so). The winner is refitted on all rows.

For the random-feature solver, use ``FunctionalRegressor(solver="rff", lam="auto")``: the same rule on one held-out
split, with every λ fitted in the same passes over the data (:mod:`rffor.solvers.selection`). Quantile functions:
``QuantileFunctionRegressorCV(solver="rff")`` fits the random-feature estimator on every fold for every candidate.
"""

from __future__ import annotations

import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import KFold, check_cv
from sklearn.utils.validation import check_is_fitted

from ._linalg import eigh_psd
from ._validation import check_theta, check_X, check_Y, fill_missing
from .edge_rule import Axis, held_out_statistic, score_statistic, select_widening
from .estimator import FunctionalRegressor
from .losses import Loss, Square
from .metrics import curve_mse
from .output_kernels import DEFAULT_RANK_TOL
from .solvers import EXACT_SOLVERS, solver_default
from .solvers.dual import DualProblem
from .solvers.selection import PARAM_RATIO

__all__ = ["FunctionalRegressorCV", "QuantileFunctionRegressorCV", "OutputKernelRegressorCV", "DEFAULT_CV_LAMS"]

#: the default λ grid of FunctionalRegressorCV (decades; extended past an edge)
DEFAULT_CV_LAMS = tuple(10.0**-k for k in range(2, 10))


class FunctionalRegressorCV(RegressorMixin, BaseEstimator):
    """FunctionalRegressor with λ (and the loss's κ or ε) chosen by cross-validation (module docstring).

    Parameters
    ----------
    loss : Loss, default Square()
    lams : sequence of float, optional
        λ grid (default :data:`DEFAULT_CV_LAMS`, 1e-2 … 1e-9), extended by two decades past a winning end.
    loss_params : None, "auto" or sequence of float, optional
        Values of the loss's parameter (κ for Huber, ε for ε-insensitive: :attr:`rffor.losses.Loss.param_name`),
        extended by the ratio of its two end values past a winning end; "auto": the loss's own value and its
        neighbours half a decade away. None: the loss's own value only.
    cv : int, cross-validation splitter or iterable of (train, test) index arrays, default 5
        An int is a shuffled ``KFold`` with ``random_state``; anything else as scikit-learn's ``check_cv`` takes
        it (e.g. ``PredefinedSplit`` for one held-out set).
    kernel_x, kernel_theta : Kernel, optional
        As in :class:`~rffor.FunctionalRegressor` (None: the median heuristic's k_X on the training rows).
    solver : {"admm", "apgd"}, default "admm"
    tol : float, default 1e-6
    max_iter : int or None
    max_extensions : int, default 3
        Extensions of each grid side past a winning end, at most (then the edge is accepted and ``at_edge_`` says
        so).
    random_state : int, default 0

    Attributes
    ----------
    lam_ : float
    loss_ : Loss
        The selected loss (with its selected parameter).
    cv_results_ : dict
        ``"lam"`` (K,), ``"loss_param"`` (K,), ``"mean_score"`` (K,), ``"fold_scores"`` (K, folds): every candidate.
    extensions_ : list of str
        Grid extensions made.
    edges_ : dict
        The edge rule's status of λ (``"lam"``) and of the loss parameter: "interior", "flat low"/"flat high",
        "low edge"/"high edge" (:mod:`rffor.edge_rule`).
    at_edge_ : bool
        Whether the selected λ or loss parameter is still an end of its (extended) grid.
    best_estimator_ : FunctionalRegressor
        Refitted on all rows.
    n_iter_ : int
        The refitted estimator's iterations.
    """

    def __init__(
        self,
        loss: Loss | None = None,
        *,
        lams=None,
        loss_params=None,
        cv=5,
        kernel_x=None,
        kernel_theta=None,
        solver: str = "admm",
        tol: float = 1e-6,
        max_iter: int | None = None,
        max_extensions: int = 3,
        random_state: int = 0,
    ):
        self.loss = loss
        self.lams = lams
        self.loss_params = loss_params
        self.cv = cv
        self.kernel_x = kernel_x
        self.kernel_theta = kernel_theta
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.max_extensions = max_extensions
        self.random_state = random_state

    def _estimator(self, loss: Loss, lam: float, kernel_x=None) -> FunctionalRegressor:
        return FunctionalRegressor(
            loss, kernel_x=kernel_x if kernel_x is not None else self.kernel_x, kernel_theta=self.kernel_theta,
            lam=lam, solver=self.solver, tol=self.tol, max_iter=self.max_iter,
        )  # fmt: skip

    def _params(self, loss: Loss) -> list[float | None]:
        if self.loss_params is None:
            return [None]
        if loss.param_name is None:
            raise ValueError(f"loss_params: {loss!r} has no kappa or epsilon to choose")
        if isinstance(self.loss_params, str):
            if self.loss_params != "auto":
                raise ValueError(f"loss_params must be None, 'auto' or a sequence of values, got {self.loss_params!r}")
            v = float(getattr(loss, loss.param_name))
            if not 0 < v < np.inf:
                raise ValueError(
                    f"loss_params='auto' starts from the loss's own {loss.param_name} and its neighbours by factors "
                    f"of √10: it must be a positive finite number, got {loss!r}"
                )
            return [v / PARAM_RATIO, v, v * PARAM_RATIO]
        return sorted({float(v) for v in self.loss_params})

    def _splits(self, X) -> list:
        if isinstance(self.cv, numbers.Integral) and not isinstance(self.cv, bool):
            return list(KFold(int(self.cv), shuffle=True, random_state=self.random_state).split(X))
        return list(check_cv(self.cv).split(X))

    def fit(self, X, y, theta=None):
        """Choose (λ, loss parameter) by cross-validation and refit on all rows.

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n, m), NaN = not observed
        theta : array-like of shape (m,), optional

        Returns
        -------
        self
        """
        self._check_solver()
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None: fit(X, y) with y the "
                "curves (or targets)"
            )
        y_given = y
        X, Y, theta = self._validate(X, y, theta)
        base_loss = self._base_loss()
        params = self._params(base_loss)
        kx, kt = self._estimator(base_loss, 1.0)._kernels(X, theta)
        lams = sorted({float(v) for v in (DEFAULT_CV_LAMS if self.lams is None else self.lams)}, reverse=True)
        folds = self._splits(X)
        eig_t = self._output_eig(kt, theta)
        per_fold = [self._fold(X, Y, theta, tr, va, kx, kt, eig_t) for tr, va in folds]
        table: dict[tuple[float | None, float], list[float]] = {}
        # the edge rule (rffor.edge_rule): the product of the grids, an axis extended past an edge its selection
        # lands on until the selection is interior, flat or at a limit (at most max_extensions per side)
        name = base_loss.param_name
        axes = {"lam": Axis(tuple(lams))}
        if len(params) > 1:
            axes[name] = Axis(tuple(params), step=None)  # past its ends: the ratio of its end values

        def evaluate(candidates: list[dict]) -> list[dict]:
            keys = [(c.get(name, params[0]), c["lam"]) for c in candidates]
            self._evaluate(set(keys), base_loss, per_fold, table)
            return [{"mean": table[k]} for k in keys]

        sel = select_widening(
            evaluate, axes, reduce={"mean": np.mean}, max_widen=int(self.max_extensions), on_edge="keep"
        )
        best = (sel.best["mean"].get(name, params[0]), sel.best["mean"]["lam"])
        keys = sorted(table, key=lambda k: (-np.inf if k[0] is None else k[0], -k[1]))
        self.cv_results_ = {
            "lam": np.array([k[1] for k in keys]),
            "loss_param": np.array([np.nan if k[0] is None else k[0] for k in keys]),
            "mean_score": np.array([np.mean(table[k]) for k in keys]),
            "fold_scores": np.array([table[k] for k in keys]),
        }
        self.extensions_ = list(sel.widened)
        self.edges_ = dict(sel.edges["mean"])
        self.at_edge_ = any(v.endswith("edge") for v in self.edges_.values())
        self.lam_ = best[1]
        self.loss_ = base_loss if best[0] is None else base_loss.with_param(best[0])
        # refitted on y as given (a 1-D y predicts 1-D, as FunctionalRegressor does)
        self.best_estimator_ = self._refit(self._estimator(self.loss_, self.lam_, kernel_x=kx), X, y_given, theta)
        self.n_features_in_ = X.shape[1]
        self.n_iter_ = self.best_estimator_.n_iter_
        return self

    def _evaluate(self, todo, base_loss, per_fold, table) -> None:
        """Fold scores of the candidates ``todo`` ((param, λ) pairs) into ``table``: per loss parameter and fold,
        the λ values from the largest down, each solve warm-started at the previous one's dual solution."""
        for p in sorted({p for p, _ in todo}, key=lambda v: -np.inf if v is None else v):
            loss = base_loss if p is None else base_loss.with_param(p)
            lams = sorted({lam for q, lam in todo if q == p}, reverse=True)
            for fold in per_fold:
                warm = True
                for lam in lams:
                    problem = self._fold_problem(fold, lam, loss)
                    res = self._solve(problem, warm)
                    warm = res.coef if not loss.is_square else True
                    table.setdefault((p, lam), []).append(self._fold_score(fold, problem, res.coef, loss))

    # ---- what differs between curve targets and quantile functions (QuantileFunctionRegressorCV overrides it)
    def _check_solver(self) -> None:
        if self.solver not in EXACT_SOLVERS:
            raise ValueError(
                f"solver must be one of {sorted(EXACT_SOLVERS)} (for solver='rff' use "
                f"FunctionalRegressor(lam='auto')), got {self.solver!r}"
            )

    def _base_loss(self) -> Loss:
        return Square() if self.loss is None else self.loss

    def _validate(self, X, y, theta):
        X = check_X(X)
        Y = check_Y(y, n_samples=X.shape[0], name="y")
        return X, Y, check_theta(theta, Y.shape[1])

    def _output_eig(self, kt, theta):
        """What every fold shares on the output side: the eigendecomposition of K_Θ on the grid."""
        return eigh_psd(kt.gram(theta))

    def _fold(self, X, Y, theta, tr, va, kx, kt, eig_t) -> dict:
        """What every candidate of a fold reuses: the training rows' K_X and its eigendecomposition, the validation
        rows' kernel, the filled training outputs."""
        K_tr = kx.gram(X[tr])
        return {
            "K_tr": K_tr, "eig_x": eigh_psd(K_tr), "K_va": kx.gram(X[va], X[tr]), "Y_tr": fill_missing(Y[tr], theta),
            "Y_va": Y[va], "K_t": kt.gram(theta), "eig_t": eig_t,
        }  # fmt: skip

    def _fold_problem(self, fold: dict, lam: float, loss: Loss) -> DualProblem:
        return DualProblem.splines(
            fold["K_tr"], fold["K_t"], fold["Y_tr"], lam, loss, eig_x=fold["eig_x"], eig_theta=fold["eig_t"]
        )

    def _fold_score(self, fold: dict, problem: DualProblem, coef: np.ndarray, loss: Loss) -> float:
        """The fold's validation score of a candidate: the midmean over curves of their MSE for a robust loss, the
        mean for the square loss (module docstring)."""
        E = curve_mse(fold["Y_va"], fold["K_va"] @ problem.prediction_weights(coef) @ fold["K_t"])
        return float(score_statistic(held_out_statistic(loss))(E))

    def _refit(self, est, X, Y, theta):
        return est.fit(X, Y, theta=theta)

    def _solve(self, problem, warm):
        solve = EXACT_SOLVERS[self.solver]
        max_iter = solver_default(self.solver, "max_iter") if self.max_iter is None else self.max_iter
        return solve(problem, tol=self.tol, max_iter=max_iter, warm_start=warm)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        return tags

    def predict(self, X, theta=None):
        """The refitted model's predictions (:meth:`rffor.FunctionalRegressor.predict`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, theta=theta)


class QuantileFunctionRegressorCV(FunctionalRegressorCV):
    """:class:`~rffor.QuantileFunctionRegressor` with λ (and the pinball loss's ε or κ) chosen by K-fold
    cross-validation, with :class:`FunctionalRegressorCV`'s path: one eigendecomposition of each fold's K_X for
    every candidate, each solve warm-started at the previous (larger) λ's dual, a grid edge extended.

    ``solver="rff"`` (in-memory data beyond the exact solvers' reach) fits every candidate on every fold with the
    random-feature estimator (DSGD with sampled levels; ``rff_params`` and ``random_state`` as in
    :class:`~rffor.QuantileFunctionRegressor`, the same features for every candidate of a fold) under the same rule and
    edge extensions: K × (grid size) fits, no warm start.

    A candidate's fold score is the pinball loss of the validation targets averaged over the training levels,
    ``(1/n_va) Σ_i (1/m) Σ_j ρ_θj(y_i − q(x_i)(θ_j))`` (the integral pinball loss; the model itself, penalty not
    included, offset fitted on the fold's training rows), or over ``score_levels`` when given. Parameters are
    :class:`FunctionalRegressorCV`'s and the quantile estimator's (``levels``, ``noncrossing``, ``offset``,
    ``rearrange``); ``loss`` defaults to ``Pinball()``; ``solver`` may also be "rff", with ``rff_params`` (dict,
    default None) the other :class:`~rffor.QuantileFunctionRegressor` parameters of its fits (``n_features_x``,
    ``n_epochs``, ``batch_size``, ...; not ``lam``, chosen here).

    Attributes
    ----------
    lam_, loss_, cv_results_, extensions_
        As in :class:`FunctionalRegressorCV`.
    best_estimator_ : QuantileFunctionRegressor
        Refitted on all rows.
    """

    def __init__(
        self,
        loss: Loss | None = None,
        *,
        lams=None,
        loss_params=None,
        cv: int = 5,
        levels=50,
        kernel_x=None,
        kernel_theta=None,
        noncrossing: float = 0.0,
        offset: str = "normal",
        rearrange: bool = True,
        solver: str = "admm",
        tol: float = 1e-5,
        max_iter: int | None = None,
        max_extensions: int = 3,
        random_state: int = 0,
        score_levels=None,
        rff_params: dict | None = None,
    ):
        super().__init__(
            loss, lams=lams, loss_params=loss_params, cv=cv, kernel_x=kernel_x, kernel_theta=kernel_theta,
            solver=solver, tol=tol, max_iter=max_iter, max_extensions=max_extensions, random_state=random_state,
        )  # fmt: skip
        self.levels = levels
        self.noncrossing = noncrossing
        self.offset = offset
        self.rearrange = rearrange
        self.score_levels = score_levels
        self.rff_params = rff_params

    def _check_solver(self) -> None:
        if self.solver == "rff":
            from .quantile import QuantileFunctionRegressor

            allowed = set(QuantileFunctionRegressor().get_params()) - set(self.get_params()) - {"lam"}
            bad = sorted(set(self.rff_params or {}) - allowed)
            if bad:
                raise ValueError(
                    f"rff_params: {bad} are not QuantileFunctionRegressor parameters this class does not set "
                    f"itself (allowed: {sorted(allowed)})"
                )
            return
        if self.rff_params:
            raise ValueError(f"rff_params is for solver='rff', got solver={self.solver!r}")
        super()._check_solver()

    def _base_loss(self) -> Loss:
        from .losses import Pinball

        return Pinball() if self.loss is None else self.loss

    def _estimator(self, loss: Loss, lam: float, kernel_x=None):
        from .quantile import QuantileFunctionRegressor

        rff = dict(self.rff_params or {}, random_state=self.random_state) if self.solver == "rff" else {}
        return QuantileFunctionRegressor(
            loss, levels=self.levels, kernel_x=kernel_x if kernel_x is not None else self.kernel_x,
            kernel_theta=self.kernel_theta, lam=lam,
            noncrossing=self.noncrossing, offset=self.offset, rearrange=self.rearrange, solver=self.solver,
            tol=self.tol, max_iter=self.max_iter, **rff,
        )  # fmt: skip

    def _validate(self, X, y, theta):
        from ._validation import check_targets
        from .levels import level_grid

        if theta is not None:
            raise ValueError("the levels of a quantile fit are the levels parameter, not theta")
        X = check_X(X)
        return X, check_targets(y, n_samples=X.shape[0]), level_grid(self.levels)

    def _fold(self, X, y, levels, tr, va, kx, kt, eig_t) -> dict:
        from ._validation import check_levels
        from .levels import NormalOffset
        from .solvers.noncrossing import output_columns

        offset = NormalOffset.fit(y[tr]) if self.offset == "normal" else None
        base = np.zeros(len(levels)) if offset is None else offset(levels)
        score_levels = levels if self.score_levels is None else check_levels(self.score_levels, "score_levels")
        if self.solver == "rff":  # no Gram matrices: every candidate is a fit of the estimator (_evaluate)
            return {"X_tr": X[tr], "y_tr": y[tr], "X_va": X[va], "y_va": y[va], "kx": kx, "score_levels": score_levels}
        anchors = levels if self.noncrossing > 0 else np.empty(0)
        K_tr = kx.gram(X[tr])
        return {
            "K_tr": K_tr, "eig_x": eigh_psd(K_tr), "K_va": kx.gram(X[va], X[tr]), "Y_tr": y[tr][:, None] - base,
            "y_va": y[va], "base": base, "levels": levels, "kt": kt, "anchors": anchors,
            "slope": None if offset is None else offset.slope(anchors),
            "score_levels": score_levels, "G": output_columns(kt, levels, anchors, score_levels),
            "score_base": np.zeros(len(score_levels)) if offset is None else offset(score_levels),
        }  # fmt: skip

    def _evaluate(self, todo, base_loss, per_fold, table) -> None:
        """rff: each candidate fitted on each fold's training rows, scored like the exact path (the model itself
        at the score levels); the exact solvers: :meth:`FunctionalRegressorCV._evaluate`'s warm-started path."""
        if self.solver != "rff":
            return super()._evaluate(todo, base_loss, per_fold, table)
        from .metrics import pinball_loss

        for p, lam in sorted(todo, key=lambda k: (-np.inf if k[0] is None else k[0], -k[1])):
            loss = base_loss if p is None else base_loss.with_param(p)
            for fold in per_fold:
                est = self._estimator(loss, lam, kernel_x=fold["kx"]).fit(fold["X_tr"], fold["y_tr"])
                Q = est.predict_raw(fold["X_va"], fold["score_levels"])
                table.setdefault((p, lam), []).append(pinball_loss(fold["y_va"], Q, fold["score_levels"], average=True))

    def _fold_problem(self, fold: dict, lam: float, loss: Loss) -> DualProblem:
        from .solvers.noncrossing import noncrossing_problem

        return noncrossing_problem(
            fold["K_tr"], fold["Y_tr"], fold["levels"], fold["kt"], lam, loss, lam_nc=float(self.noncrossing),
            anchors=fold["anchors"], offset_slope=fold["slope"], eig_x=fold["eig_x"],
        )  # fmt: skip

    def _fold_score(self, fold: dict, problem: DualProblem, coef: np.ndarray, loss: Loss) -> float:
        from .metrics import pinball_loss

        Q = fold["K_va"] @ problem.prediction_weights(coef) @ fold["G"] + fold["score_base"]
        return pinball_loss(fold["y_va"], Q, fold["score_levels"], average=True)

    def _refit(self, est, X, y, levels):
        return est.fit(X, y)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = False
        return tags

    def predict(self, X, levels=None):
        """The refitted model's quantiles (:meth:`rffor.QuantileFunctionRegressor.predict`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, levels=levels)


class OutputKernelRegressorCV(FunctionalRegressorCV):
    """:class:`~rffor.OutputKernelRegressor` with Λ (and the loss's κ or ε) chosen by K-fold cross-validation, with
    :class:`FunctionalRegressorCV`'s rule and path: each fold's K_X eigendecomposition and output factor computed
    once for every candidate, each solve warm-started at the previous (larger) Λ's dual solution, a grid edge
    extended (two decades of Λ, one more step of κ/ε) at most ``max_extensions`` times, the winner refitted on all
    rows.

    A candidate's fold score (lower is better):

    - ``scoring="embedding"`` (default): per validation sample the squared distance in the output RKHS between the
      model and the output, ``‖h(x) − ψ(y)‖² = k(y, y) − 2<h(x), ψ(y)> + ‖h(x)‖²`` (the surrogate loss of seed 004
      eq. (5); observed coordinates only when labels are missing); the midmean over the fold's samples for a robust
      loss (validation outputs are as corrupted as training ones), the mean for the square loss;
    - ``scoring="decoded"``: the mean over the fold's samples of the kernel loss of the decoded prediction,
      ``Δ(ŷ, y) = ‖ψ(ŷ) − ψ(y)‖²`` (:func:`rffor.structured.kernel_loss`: label sets with ``Linear()``, the number
      of wrong labels, i.e. m × the Hamming loss), with the closed-form decoder of ``predict`` (label sets,
      histograms, vectors with an explicit embedding; class labels for Delta; scalars, with any kernel, by the 1-D
      minimisation). A decoded loss is bounded per sample for the bounded output sets, so the mean is used for
      every loss.

    Parameters
    ----------
    loss : Loss, default Square()
        As in :class:`~rffor.OutputKernelRegressor`.
    lams : sequence of float, optional
        Λ grid (default :data:`DEFAULT_CV_LAMS`), extended by two decades past a winning end.
    loss_params : None, "auto" or sequence of float, optional
        κ (Huber) or ε values, as in :class:`FunctionalRegressorCV`.
    cv : int, splitter or iterable of (train, test) index arrays, default 5
    kernel_x, kernel_y, output_type, rank_tol
        As in :class:`~rffor.OutputKernelRegressor` (None kernel_x: the median heuristic on all training rows).
    scoring : {"embedding", "decoded"}, default "embedding"
    solver : {"auto", "admm", "apgd"}, default "auto"
        "auto" chooses per solve as the estimator does (:func:`rffor.structured.choose_solver`).
    tol, max_iter, max_extensions, random_state
        As in :class:`FunctionalRegressorCV`.

    Attributes
    ----------
    lam_, loss_, cv_results_, extensions_, at_edge_
        As in :class:`FunctionalRegressorCV`.
    best_estimator_ : OutputKernelRegressor
        Refitted on all rows.
    """

    def __init__(
        self,
        loss: Loss | None = None,
        *,
        lams=None,
        loss_params=None,
        cv=5,
        kernel_x=None,
        kernel_y=None,
        output_type: str = "auto",
        scoring: str = "embedding",
        solver: str = "auto",
        tol: float = 1e-6,
        max_iter: int | None = None,
        rank_tol: float = DEFAULT_RANK_TOL,
        max_extensions: int = 3,
        random_state: int = 0,
    ):
        self.loss = loss
        self.lams = lams
        self.loss_params = loss_params
        self.cv = cv
        self.kernel_x = kernel_x
        self.kernel_y = kernel_y
        self.output_type = output_type
        self.scoring = scoring
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.rank_tol = rank_tol
        self.max_extensions = max_extensions
        self.random_state = random_state

    def fit(self, X, y):
        """Choose (Λ, loss parameter) by cross-validation and refit on all rows.

        Parameters
        ----------
        X : array-like of shape (n, d)
        y : array-like of shape (n,) or (n, m)
            As in :meth:`rffor.OutputKernelRegressor.fit`.

        Returns
        -------
        self
        """
        return super().fit(X, y)

    def _check_solver(self) -> None:
        if self.solver not in ("auto", *EXACT_SOLVERS):
            raise ValueError(f"solver must be 'auto' or one of {sorted(EXACT_SOLVERS)}, got {self.solver!r}")
        if self.scoring not in ("embedding", "decoded"):
            raise ValueError(f"scoring must be 'embedding' or 'decoded', got {self.scoring!r}")

    def _base_loss(self) -> Loss:
        return self._estimator(None, 1.0)._loss()

    def _estimator(self, loss: Loss | None, lam: float, kernel_x=None):
        from .structured import OutputKernelRegressor

        return OutputKernelRegressor(
            loss if loss is not None else self.loss, kernel_x=kernel_x if kernel_x is not None else self.kernel_x,
            kernel_y=self.kernel_y, lam=lam, output_type=self.output_type, solver=self.solver, tol=self.tol,
            max_iter=self.max_iter, rank_tol=self.rank_tol,
        )  # fmt: skip

    def _validate(self, X, y, theta):
        X = check_X(X)
        est = self._estimator(None, 1.0)
        kernel = est._output_kernel()
        Y, kind = est._check_outputs(y, X.shape[0], kernel)
        scalar = kind == "vector" and Y.shape[1] == 1
        if self.scoring == "decoded" and kind != "labels" and not scalar and kernel.decoder(kind) is None:
            raise ValueError(
                f"scoring='decoded' needs a closed-form decoder: {kernel!r} has none for {kind} outputs; use "
                "scoring='embedding'"
            )
        self.output_type_ = kind
        return X, Y, None

    def _output_eig(self, kt, theta):
        return None

    def _fold(self, X, Y, theta, tr, va, kx, ky, eig_t) -> dict:
        """The fold's K_X (and eigendecomposition), the factor of its training outputs (or their masked embedding),
        and what scores the validation outputs: their embedding, or their coordinates V⁺ K_Y(train, ·) and k(y, y)."""
        K_tr = kx.gram(X[tr])
        Y_tr, Y_va = Y[tr], Y[va]
        fold = {"K_tr": K_tr, "eig_x": eigh_psd(K_tr), "K_va": kx.gram(X[va], X[tr]), "ky": ky, "Y_va": Y_va}
        masked = Y_tr.ndim == 2 and bool(np.isnan(Y_tr).any())
        if masked:
            Psi = ky.embedding(Y_tr)
            fold.update(mask=~np.isnan(Psi), V=np.nan_to_num(Psi), T=np.eye(Psi.shape[1]))
        else:
            f = ky.factor(Y_tr, self.rank_tol)
            fold.update(mask=None, V=f.V, T=f.to_embedding, Y_tr=Y_tr, coordT=np.linalg.pinv(f.V).T)
        if ky.has_embedding:
            fold["Psi_va"] = ky.embedding(Y_va)
        else:
            fold["coords_va"] = (np.linalg.pinv(fold["V"]) @ ky.gram(Y_tr, Y_va)).T
            fold["diag_va"] = ky.diag(Y_va)
        if self.output_type_ == "labels":
            classes = np.unique(Y_tr)
            fold["classes"] = classes
            fold["class_coords"] = np.linalg.pinv(fold["V"]) @ ky.gram(Y_tr, classes)
        return fold

    def _fold_problem(self, fold: dict, lam: float, loss: Loss) -> DualProblem:
        from .structured import _MaskedLoss

        dual_loss = loss if fold["mask"] is None else _MaskedLoss(base=loss, mask=fold["mask"])
        return DualProblem.structured(fold["K_tr"], fold["V"], lam, dual_loss, eig_x=fold["eig_x"])

    def _fold_score(self, fold: dict, problem: DualProblem, coef: np.ndarray, loss: Loss) -> float:
        from .structured import decode_closed_form, decode_scalar, kernel_loss

        H_V = fold["K_va"] @ (coef * problem.c)  # h(x) in the coordinates of V (or of the masked embedding)
        ky = fold["ky"]
        if self.scoring == "decoded":
            if self.output_type_ == "labels":
                P = fold["classes"][np.argmax(H_V @ fold["class_coords"], axis=1)]
            elif fold["T"] is not None and ky.decoder(self.output_type_) is not None:
                P = decode_closed_form(ky, self.output_type_, H_V @ fold["T"])
            else:  # scalar outputs: the 1-D minimisation with the weights α_range(x) = V⁺ᵀ h_V(x)
                P = decode_scalar(ky, fold["Y_tr"], H_V @ fold["coordT"].T)[:, None]
            return float(np.mean(kernel_loss(ky, P, fold["Y_va"])))
        if ky.has_embedding:
            D = H_V @ fold["T"] - fold["Psi_va"]
            E = np.nansum(D * D, axis=1)
        else:
            E = fold["diag_va"] - 2.0 * np.einsum("ij,ij->i", H_V, fold["coords_va"]) + np.einsum("ij,ij->i", H_V, H_V)
        return float(score_statistic(held_out_statistic(loss))(E))

    def _solve(self, problem, warm):
        from .structured import choose_solver, solve_structured

        solver = choose_solver(problem, self.solver)
        return solve_structured(problem, solver, tol=self.tol, max_iter=self.max_iter, warm_start=warm)

    def _refit(self, est, X, Y, theta):
        return est.fit(X, Y)  # y as given (FunctionalRegressorCV.fit passes it)

    def predict(self, X):
        """The refitted model's predictions (:meth:`rffor.OutputKernelRegressor.predict`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X)

    def decode(self, X, candidates):
        """The refitted model's decoding over candidates (:meth:`rffor.OutputKernelRegressor.decode`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.decode(X, candidates)

    def score(self, X, y, sample_weight=None):
        """The refitted model's score (:meth:`rffor.OutputKernelRegressor.score`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.score(X, y, sample_weight=sample_weight)
