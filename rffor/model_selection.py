"""Cross-validated choice of λ (and κ or ε) for the exact solvers, reusing work along the path.

:class:`FunctionalRegressorCV` is to :class:`~rffor.FunctionalRegressor` what scikit-learn's ``RidgeCV`` is to
``Ridge``. For each fold it computes the eigendecomposition of the fold's K_X once (and of K_Θ once for all folds):
the duals (D_s) of every λ and every loss parameter share them (MATH.md §3.1: λ enters only through the scalar
``c = 1/(λnm)``), and the robust losses are solved from the largest λ down, each ADMM/APGD solve warm-started at the
previous λ's dual solution. A candidate's fold score is the **median** over the fold's validation curves of their
MSE for a robust loss (paper 000 §5.1: outlying validation curves do not reward fitting outliers), the mean for the
square loss; the candidate with the lowest mean fold score wins, and a λ at an end of the grid extends the grid by
two decades in that direction (at most ``max_extensions`` times). The winner is refitted on all rows.

For the random-feature solver, use ``FunctionalRegressor(solver="rff", lam="auto")``: the same rule on one held-out
split, with every λ fitted in the same passes over the data (:mod:`rffor.solvers.lam_path`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted

from ._linalg import eigh_psd
from ._validation import check_theta, check_X, check_Y, fill_missing
from .estimator import FunctionalRegressor
from .losses import Loss, Square
from .metrics import curve_mse
from .solvers import EXACT_SOLVERS, solver_default
from .solvers.dual import DualProblem

__all__ = ["FunctionalRegressorCV", "QuantileFunctionRegressorCV", "DEFAULT_CV_LAMS"]

#: the default λ grid of FunctionalRegressorCV (decades; extended past an edge)
DEFAULT_CV_LAMS = tuple(10.0**-k for k in range(2, 10))


class FunctionalRegressorCV(RegressorMixin, BaseEstimator):
    """FunctionalRegressor with λ (and the loss's κ or ε) chosen by K-fold cross-validation (module docstring).

    Parameters
    ----------
    loss : Loss, default Square()
    lams : sequence of float, optional
        λ grid (default :data:`DEFAULT_CV_LAMS`, 1e-2 … 1e-9).
    loss_params : sequence of float, optional
        Values of the loss's parameter (κ for Huber, ε for ε-insensitive: the loss's ``kappa`` or ``epsilon``
        field); default: the loss's own value only.
    cv : int, default 5
        Folds (shuffled ``KFold`` with ``random_state``).
    kernel_x, kernel_theta : Kernel, optional
        As in :class:`~rffor.FunctionalRegressor`.
    solver : {"admm", "apgd"}, default "admm"
    tol : float, default 1e-6
    max_iter : int or None
    max_extensions : int, default 3
    random_state : int, default 0

    Attributes
    ----------
    lam_ : float
    loss_ : Loss
        The selected loss (with its selected parameter).
    cv_results_ : dict
        ``"lam"`` (K,), ``"loss_param"`` (K,), ``"mean_score"`` (K,), ``"fold_scores"`` (K, cv): every candidate.
    extensions_ : list of str
        Grid extensions made.
    best_estimator_ : FunctionalRegressor
        Refitted on all rows.
    """

    def __init__(
        self,
        loss: Loss | None = None,
        *,
        lams=None,
        loss_params=None,
        cv: int = 5,
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

    def _estimator(self, loss: Loss, lam: float) -> FunctionalRegressor:
        return FunctionalRegressor(
            loss, kernel_x=self.kernel_x, kernel_theta=self.kernel_theta, lam=lam, solver=self.solver, tol=self.tol,
            max_iter=self.max_iter,
        )  # fmt: skip

    def _losses(self) -> list[Loss]:
        loss = Square() if self.loss is None else self.loss
        if self.loss_params is None:
            return [loss]
        field = self._loss_field(loss)
        if field is None:
            raise ValueError(f"loss_params: {loss!r} has no kappa or epsilon to choose")
        return [dataclasses.replace(loss, **{field: float(v)}) for v in self.loss_params]

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
        if self.solver not in EXACT_SOLVERS:
            raise ValueError(
                f"solver must be one of {sorted(EXACT_SOLVERS)} (for solver='rff' use "
                f"FunctionalRegressor(lam='auto')), got {self.solver!r}"
            )
        X, Y, theta = self._validate(X, y, theta)
        losses = self._losses()
        base = self._estimator(losses[0], 1.0)
        kx, kt = base._kernels(X.shape[1], theta)
        lams = sorted({float(v) for v in (DEFAULT_CV_LAMS if self.lams is None else self.lams)}, reverse=True)
        folds = list(KFold(int(self.cv), shuffle=True, random_state=self.random_state).split(X))
        eig_t = eigh_psd(kt.gram(theta))
        per_fold = [self._fold(X, Y, theta, tr, va, kx, kt, eig_t) for tr, va in folds]
        table: dict[tuple[int, float], list[float]] = {}
        extensions: list[str] = []
        todo = lams
        for ext in range(int(self.max_extensions) + 1):
            for j, loss in enumerate(losses):
                for fold in per_fold:
                    warm = True
                    for lam in sorted(todo, reverse=True):
                        problem = self._fold_problem(fold, lam, loss)
                        res = self._solve(problem, warm)
                        warm = res.coef if not loss.is_square else True
                        table.setdefault((j, lam), []).append(self._fold_score(fold, problem, res.coef, loss))
            keys = sorted(table)
            best = min(keys, key=lambda k: np.mean(table[k]))
            grid = sorted({lam for (_, lam) in table})
            if grid.index(best[1]) not in (0, len(grid) - 1) or ext == self.max_extensions:
                break
            todo = [grid[0] / 10, grid[0] / 100] if grid.index(best[1]) == 0 else [grid[-1] * 10, grid[-1] * 100]
            extensions.append(("down: " if todo[0] < grid[0] else "up: ") + ", ".join(f"{v:.0e}" for v in todo))
        keys = sorted(table, key=lambda k: (k[0], -k[1]))
        field = self._loss_field(losses[0])
        self.cv_results_ = {
            "lam": np.array([k[1] for k in keys]),
            "loss_param": np.array([getattr(losses[k[0]], field) if field else np.nan for k in keys]),
            "mean_score": np.array([np.mean(table[k]) for k in keys]),
            "fold_scores": np.array([table[k] for k in keys]),
        }
        self.extensions_ = extensions
        self.lam_, self.loss_ = best[1], losses[best[0]]
        self.best_estimator_ = self._refit(self._estimator(self.loss_, self.lam_), X, Y, theta)
        self.n_features_in_ = X.shape[1]
        return self

    # ---- what differs between curve targets and quantile functions (QuantileFunctionRegressorCV overrides it)
    def _validate(self, X, y, theta):
        X = check_X(X)
        Y = check_Y(y, n_samples=X.shape[0], name="y")
        return X, Y, check_theta(theta, Y.shape[1])

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
        """The fold's validation score of a candidate: the median over curves of their MSE for a robust loss, the
        mean for the square loss (module docstring)."""
        E = curve_mse(fold["Y_va"], fold["K_va"] @ (coef * problem.c) @ fold["K_t"])
        return float(np.mean(E) if loss.is_square else np.median(E))

    def _refit(self, est, X, Y, theta):
        return est.fit(X, Y, theta=theta)

    @staticmethod
    def _loss_field(loss: Loss) -> str | None:
        """The loss parameter ``loss_params`` sets: ``kappa`` or ``epsilon`` (the non-zero one if it has both)."""
        fields = [f for f in ("kappa", "epsilon") if hasattr(loss, f)]
        nonzero = [f for f in fields if getattr(loss, f)]
        return (nonzero or fields or [None])[0]

    def _solve(self, problem, warm):
        solve = EXACT_SOLVERS[self.solver]
        max_iter = solver_default(self.solver, "max_iter") if self.max_iter is None else self.max_iter
        kwargs = {"warm_start": warm} if self.solver == "admm" else {}
        return solve(problem, tol=self.tol, max_iter=max_iter, **kwargs)

    def predict(self, X, theta=None):
        """The refitted model's predictions (:meth:`rffor.FunctionalRegressor.predict`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, theta=theta)


class QuantileFunctionRegressorCV(FunctionalRegressorCV):
    """:class:`~rffor.QuantileFunctionRegressor` with λ (and the pinball loss's ε or κ) chosen by K-fold
    cross-validation, with :class:`FunctionalRegressorCV`'s path: one eigendecomposition of each fold's K_X for
    every candidate, each solve warm-started at the previous (larger) λ's dual, a grid edge extended.

    A candidate's fold score is the pinball loss of the validation targets averaged over the training levels,
    ``(1/n_va) Σ_i (1/m) Σ_j ρ_θj(y_i − q(x_i)(θ_j))`` (the integral pinball loss; the model itself, penalty not
    included, offset fitted on the fold's training rows), or over ``score_levels`` when given. Parameters are
    :class:`FunctionalRegressorCV`'s and the quantile estimator's (``levels``, ``noncrossing``, ``offset``,
    ``rearrange``); ``loss`` defaults to ``Pinball()``.

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

    def _losses(self) -> list[Loss]:
        if self.loss is not None:
            return super()._losses()
        if self.loss_params is not None:
            raise ValueError("loss_params: pass loss=Pinball(epsilon=...) or Pinball(kappa=...) to say which to vary")
        from .losses import Pinball

        return [Pinball()]

    def _estimator(self, loss: Loss, lam: float):
        from .quantile import QuantileFunctionRegressor

        return QuantileFunctionRegressor(
            loss, levels=self.levels, kernel_x=self.kernel_x, kernel_theta=self.kernel_theta, lam=lam,
            noncrossing=self.noncrossing, offset=self.offset, rearrange=self.rearrange, solver=self.solver,
            tol=self.tol, max_iter=self.max_iter,
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
        anchors = levels if self.noncrossing > 0 else np.empty(0)
        K_tr = kx.gram(X[tr])
        return {
            "K_tr": K_tr, "eig_x": eigh_psd(K_tr), "K_va": kx.gram(X[va], X[tr]), "Y_tr": y[tr][:, None] - base,
            "y_va": y[va], "base": base, "levels": levels, "kt": kt, "anchors": anchors,
            "slope": None if offset is None else offset.slope(anchors),
            "score_levels": score_levels, "G": output_columns(kt, levels, anchors, score_levels),
            "score_base": np.zeros(len(score_levels)) if offset is None else offset(score_levels),
        }  # fmt: skip

    def _fold_problem(self, fold: dict, lam: float, loss: Loss) -> DualProblem:
        from .solvers.noncrossing import noncrossing_problem

        return noncrossing_problem(
            fold["K_tr"], fold["Y_tr"], fold["levels"], fold["kt"], lam, loss, lam_nc=float(self.noncrossing),
            anchors=fold["anchors"], offset_slope=fold["slope"], eig_x=fold["eig_x"],
        )  # fmt: skip

    def _fold_score(self, fold: dict, problem: DualProblem, coef: np.ndarray, loss: Loss) -> float:
        from .metrics import pinball_loss

        Q = fold["K_va"] @ (coef * problem.c) @ fold["G"] + fold["score_base"]
        return pinball_loss(fold["y_va"], Q, fold["score_levels"], average=True)

    def _refit(self, est, X, y, levels):
        return est.fit(X, y)

    def predict(self, X, levels=None):
        """The refitted model's quantiles (:meth:`rffor.QuantileFunctionRegressor.predict`)."""
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.predict(X, levels=levels)
