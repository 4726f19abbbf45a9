"""Plots of function-valued regression: curves, training history, and a κ / ε path (matplotlib, optional).

Install with ``pip install "rffor[plot]"``. Every function draws into ``ax`` when given (so it composes with
``matplotlib.pyplot``), otherwise it creates a :class:`matplotlib.figure.Figure` without touching pyplot's global
state (safe in scripts, threads and headless machines), and returns the figure; save it with
``fig.savefig("curves.png")``.

- :func:`plot_curves` — predicted curves against observed (or true) ones for a few inputs.
- :func:`plot_history` — objective per iteration (exact solvers) or per round (random features).
- :func:`compute_path` and :func:`plot_path` — test error and dual sparsity along a path of κ (Huber) or ε
  (ε-insensitive) values.
- :func:`plot_quantile_curves` and :func:`plot_calibration` — quantile functions of a 1-D input (crossings visible)
  and the held-out coverage of each level (MATH.md §6).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = [
    "plot_curves",
    "plot_history",
    "compute_path",
    "plot_path",
    "dual_sparsity",
    "plot_quantile_curves",
    "plot_calibration",
]

_COLORS = ("tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange", "tab:brown")


def _matplotlib():
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("rffor.plot needs matplotlib, an optional dependency: pip install 'rffor[plot]'") from None
    return Figure


def _figure_and_axes(ax, n_panels: int = 1, *, ncols: int | None = None, panel_size=(3.6, 2.8)):
    Figure = _matplotlib()
    if ax is not None:
        axes = np.atleast_1d(ax).ravel()
        if axes.size < n_panels:
            raise ValueError(f"ax must hold at least {n_panels} axes, got {axes.size}")
        return axes[0].figure, axes
    ncols = min(n_panels, 4) if ncols is None else ncols
    nrows = -(-n_panels // ncols)
    fig = Figure(figsize=(panel_size[0] * ncols, panel_size[1] * nrows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(nrows, ncols, squeeze=False)).ravel()
    for extra in axes[n_panels:]:
        extra.set_visible(False)
    return fig, axes


def _as_predictions(Y_pred) -> dict[str, np.ndarray]:
    if isinstance(Y_pred, Mapping):
        return {str(k): np.asarray(v, dtype=np.float64) for k, v in Y_pred.items()}
    return {"predicted": np.asarray(Y_pred, dtype=np.float64)}


def plot_curves(
    theta,
    Y_true,
    Y_pred,
    *,
    indices: Sequence[int] | None = None,
    n_curves: int = 4,
    theta_pred=None,
    Y_observed=None,
    ax=None,
    title: str | None = None,
    panel_titles: Sequence[str] | None = None,
    true_label: str = "true",
    xlabel: str = "θ",
    ylabel: str = "y(θ)",
):
    """Predicted curves against true ones, one panel per input.

    Parameters
    ----------
    theta : array-like of shape (m,)
        Grid of ``Y_true``.
    Y_true : array-like of shape (n, m)
        True (or observed) curves; NaN entries are not drawn.
    Y_pred : array-like of shape (n, m_pred), or dict of label -> array
        Predictions of one or several models.
    indices : sequence of int, optional
        Rows to draw; default ``n_curves`` rows evenly spread over the data.
    n_curves : int, default 4
        Number of panels when ``indices`` is None.
    theta_pred : array-like of shape (m_pred,), optional
        Grid of the predictions, default ``theta``.
    Y_observed : array-like of shape (n, m), optional
        Noisy or corrupted observations of the same inputs, drawn as dots (e.g. training data with outliers).
    ax : matplotlib Axes or array of Axes, optional
        Axes to draw into (at least as many as panels).
    title : str, optional
        Figure title.
    panel_titles : sequence of str, optional
        One title per panel (default "input i").
    true_label : str, default "true"
        Legend label of ``Y_true``.
    xlabel, ylabel : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    theta = np.asarray(theta, dtype=np.float64)
    Y_true = np.atleast_2d(np.asarray(Y_true, dtype=np.float64))
    preds = _as_predictions(Y_pred)
    theta_pred = theta if theta_pred is None else np.asarray(theta_pred, dtype=np.float64)
    n = Y_true.shape[0]
    if Y_true.shape[1] != theta.shape[0]:
        raise ValueError(f"Y_true has {Y_true.shape[1]} columns but theta has {theta.shape[0]} locations")
    for label, P in preds.items():
        P = np.atleast_2d(P)
        if P.shape != (n, theta_pred.shape[0]):
            raise ValueError(f"prediction {label!r} has shape {P.shape}, expected {(n, theta_pred.shape[0])}")
        preds[label] = P
    if indices is None:
        k = max(1, min(int(n_curves), n))
        indices = np.unique(np.linspace(0, n - 1, k).round().astype(int))
    indices = [int(i) for i in indices]
    if any(not -n <= i < n for i in indices):
        raise ValueError(f"indices must be in [0, {n}), got {indices}")
    if panel_titles is not None and len(panel_titles) != len(indices):
        raise ValueError(f"got {len(panel_titles)} panel titles for {len(indices)} panels")
    fig, axes = _figure_and_axes(ax, len(indices))
    for panel, (a, i) in enumerate(zip(axes, indices, strict=False)):
        if Y_observed is not None:
            a.plot(theta, np.asarray(Y_observed, dtype=np.float64)[i], ".", color="0.6", ms=3, label="observed")
        a.plot(theta, Y_true[i], color="black", lw=2, label=true_label)
        for c, (label, P) in enumerate(preds.items()):
            a.plot(theta_pred, P[i], color=_COLORS[c % len(_COLORS)], lw=1.5, ls="--", label=label)
        a.set_title(panel_titles[panel] if panel_titles is not None else f"input {i}", fontsize=9)
        a.set_xlabel(xlabel)
        if panel % 4 == 0:
            a.set_ylabel(ylabel)
        if panel == 0:
            a.legend(fontsize=7, loc="best")
    if title:
        fig.suptitle(title)
    return fig


def plot_history(
    histories,
    *,
    labels: Sequence[str] | None = None,
    ax=None,
    log: bool = True,
    xlabel: str = "iteration / round",
    ylabel: str = "objective",
    title: str | None = None,
):
    """Training history: the objective recorded during ``fit``.

    Parameters
    ----------
    histories : FunctionalRegressor, array-like, or a sequence / dict of them
        Fitted estimators (their ``objective_history_``) or the histories themselves.
    labels : sequence of str, optional
        Curve labels (dict keys when ``histories`` is a dict).
    ax : matplotlib Axes, optional
    log : bool, default True
        Logarithmic y axis (when every value is positive).
    xlabel, ylabel, title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(histories, Mapping):
        labels = list(histories.keys()) if labels is None else labels
        histories = list(histories.values())
    elif hasattr(histories, "objective_history_") or (
        isinstance(histories, np.ndarray)
        or (isinstance(histories, Sequence) and histories and np.isscalar(histories[0]))
    ):
        histories = [histories]
    curves = []
    for h in histories:
        values = getattr(h, "objective_history_", h)
        curves.append(np.asarray(values, dtype=np.float64).ravel())
    if labels is None:
        labels = [None] * len(curves)
    if len(labels) != len(curves):
        raise ValueError(f"got {len(labels)} labels for {len(curves)} histories")
    fig, axes = _figure_and_axes(ax, 1, panel_size=(5.0, 3.4))
    a = axes[0]
    for c, (values, label) in enumerate(zip(curves, labels, strict=True)):
        a.plot(
            np.arange(len(values)),
            values,
            color=_COLORS[c % len(_COLORS)],
            marker="." if len(values) < 40 else None,
            label=label,
        )
    from matplotlib.ticker import MaxNLocator

    a.xaxis.set_major_locator(MaxNLocator(integer=True))
    if log and all(v.size and np.all(v[np.isfinite(v)] > 0) for v in curves):
        a.set_yscale("log")
    a.set_xlabel(xlabel)
    a.set_ylabel(ylabel)
    if any(label is not None for label in labels):
        a.legend(fontsize=8)
    if title:
        a.set_title(title)
    return fig


def dual_sparsity(estimator) -> float:
    """Share of zero dual coefficients of a fitted exact model (MATH.md §7).

    Zero rows of ``dual_coef_`` for the norm losses, whose dual penalty acts on whole rows (``loss.integral`` False:
    ℓ_ε^2's zero rows are curves that do not shape the model), zero entries for the integral losses (ℓ_ε^∞ and the
    others). NaN for random-feature models, which have no dual coefficients.
    """
    A = getattr(estimator, "dual_coef_", None)
    if A is None:
        return float("nan")
    A = np.asarray(A)
    loss = getattr(estimator, "loss_", None)
    if not getattr(loss, "integral", True):
        return float(np.mean(np.all(A == 0, axis=1)))
    return float(np.mean(A == 0))


def compute_path(
    estimator, X, Y, values, *, param: str | None = None, X_test=None, Y_test=None, theta=None
) -> dict[str, Any]:
    """Refit an estimator along a path of κ or ε values and record test error and sparsity.

    Parameters
    ----------
    estimator : FunctionalRegressor
        Its ``loss`` (a Huber or EpsilonInsensitive) gives the loss family; other parameters are kept.
    X, Y : array-like of shapes (n, d), (n, m)
        Training data.
    values : sequence of float
        κ (Huber) or ε (ε-insensitive) values.
    param : {"kappa", "epsilon"}, optional
        Default: the parameter of the estimator's loss.
    X_test, Y_test : array-like, optional
        Held-out data for the error (default: the training data).
    theta : array-like of shape (m,), optional

    Returns
    -------
    dict
        ``param``, ``values``, ``mse`` (test MSE of MATH.md §7), ``sparsity`` (:func:`dual_sparsity`), ``n_iter``.
    """
    import dataclasses

    from sklearn.base import clone

    from .metrics import mse

    loss = estimator.loss
    if param is None:
        fields = {f.name for f in dataclasses.fields(loss)} if dataclasses.is_dataclass(loss) else set()
        param = "kappa" if "kappa" in fields else "epsilon" if "epsilon" in fields else None
    if param not in ("kappa", "epsilon"):
        raise ValueError(f"param must be 'kappa' or 'epsilon' (the estimator's loss is {loss!r})")
    X_test = X if X_test is None else X_test
    Y_test = Y if Y_test is None else Y_test
    out: dict[str, Any] = {
        "param": param,
        "values": np.asarray(values, dtype=np.float64),
        "mse": [],
        "sparsity": [],
        "n_iter": [],
    }
    for v in out["values"]:
        est = clone(estimator).set_params(loss=dataclasses.replace(loss, **{param: float(v)}))
        est.fit(X, Y, theta=theta)
        out["mse"].append(mse(Y_test, est.predict(X_test)))
        out["sparsity"].append(dual_sparsity(est))
        out["n_iter"].append(int(getattr(est, "n_iter_", 0)))
    for key in ("mse", "sparsity", "n_iter"):
        out[key] = np.asarray(out[key])
    return out


def plot_path(
    values,
    errors,
    sparsity=None,
    *,
    param: str = "epsilon",
    ax=None,
    logx: bool = True,
    error_label: str = "test MSE",
    title: str | None = None,
):
    """Error (left axis) and dual sparsity (right axis) along a path of κ or ε.

    Parameters
    ----------
    values : array-like of shape (k,), or the dict returned by :func:`compute_path`
        κ or ε values (then ``errors`` and ``sparsity`` are read from the dict when not given).
    errors : array-like of shape (k,)
    sparsity : array-like of shape (k,), optional
        Share of zero dual coefficients (drawn on a second axis, in %).
    param : {"kappa", "epsilon"}
    ax : matplotlib Axes, optional
    logx : bool, default True
        Logarithmic x axis (when every value is positive).
    error_label, title : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    if isinstance(values, Mapping):
        path = values
        values, param = path["values"], path.get("param", param)
        errors = path["mse"] if errors is None else errors
        sparsity = path.get("sparsity") if sparsity is None else sparsity
    values = np.asarray(values, dtype=np.float64)
    errors = np.asarray(errors, dtype=np.float64)
    if errors.shape != values.shape:
        raise ValueError(f"errors has shape {errors.shape}, values {values.shape}")
    symbol = {"kappa": "κ", "epsilon": "ε"}.get(param, param)
    fig, axes = _figure_and_axes(ax, 1, panel_size=(5.0, 3.4))
    a = axes[0]
    a.plot(values, errors, "o-", color=_COLORS[0], label=error_label)
    a.set_xlabel(symbol)
    a.set_ylabel(error_label, color=_COLORS[0])
    if logx and np.all(values > 0):
        a.set_xscale("log")
    if sparsity is not None:
        sparsity = np.asarray(sparsity, dtype=np.float64)
        if sparsity.shape != values.shape:
            raise ValueError(f"sparsity has shape {sparsity.shape}, values {values.shape}")
        b = a.twinx()
        b.plot(values, 100 * sparsity, "s--", color=_COLORS[1], label="sparsity")
        b.set_ylabel("zero dual coefficients (%)", color=_COLORS[1])
        b.set_ylim(-2, 102)
    if title:
        a.set_title(title)
    return fig


def plot_quantile_curves(
    x,
    Q,
    levels,
    *,
    X_observed=None,
    y_observed=None,
    ax=None,
    title: str | None = None,
    xlabel: str = "x",
    ylabel: str = "y",
):
    """Predicted quantile curves ``x ↦ q(x)(τ)`` of a one-dimensional input, one line per level, coloured from blue
    (τ near 0) to red (τ near 1), as thesis 003 Figure 5.2 draws them; crossings show as lines that cross.

    Parameters
    ----------
    x : array-like of shape (n,)
        Input values (sorted for a clean drawing).
    Q : array-like of shape (n, q)
        Quantiles at ``levels`` (e.g. ``est.predict(x[:, None], levels)``).
    levels : array-like of shape (q,)
    X_observed, y_observed : array-like of shape (n_obs,), optional
        Data, drawn as dots.
    ax : matplotlib Axes, optional
    title, xlabel, ylabel : str

    Returns
    -------
    matplotlib.figure.Figure
    """
    x = np.asarray(x, dtype=np.float64).ravel()
    Q = np.asarray(Q, dtype=np.float64)
    levels = np.asarray(levels, dtype=np.float64).ravel()
    if Q.shape != (x.shape[0], levels.shape[0]):
        raise ValueError(f"Q must have shape {(x.shape[0], levels.shape[0])} (inputs, levels), got {Q.shape}")
    from matplotlib import colormaps

    fig, axes = _figure_and_axes(ax, 1, panel_size=(5.0, 3.6))
    a = axes[0]
    if X_observed is not None and y_observed is not None:
        a.plot(np.ravel(X_observed), np.ravel(y_observed), ".", color="0.5", ms=3, zorder=3)
    cmap = colormaps["coolwarm"]
    order = np.argsort(x)
    for k, t in enumerate(levels):
        a.plot(x[order], Q[order, k], color=cmap(float(t)), lw=0.8)
    a.set_xlabel(xlabel)
    a.set_ylabel(ylabel)
    if title:
        a.set_title(title, fontsize=9)
    return fig


def plot_calibration(levels, coverages, *, labels: Sequence[str] | None = None, ax=None, title: str | None = None):
    """Calibration of predicted quantiles: the share of held-out targets at or below the τ-quantile against τ
    (:func:`rffor.metrics.quantile_coverage`), with the diagonal and ``max |coverage − τ|`` in the legend.

    Parameters
    ----------
    levels : array-like of shape (q,)
    coverages : array-like of shape (q,), or a sequence / dict of them (several models)
    labels : sequence of str, optional
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    levels = np.asarray(levels, dtype=np.float64).ravel()
    if isinstance(coverages, Mapping):
        labels = list(coverages.keys()) if labels is None else labels
        coverages = list(coverages.values())
    elif np.ndim(coverages) == 1:
        coverages = [coverages]
    curves = [np.asarray(c, dtype=np.float64).ravel() for c in coverages]
    if any(c.shape != levels.shape for c in curves):
        raise ValueError(f"every coverage must have the shape of levels {levels.shape}")
    labels = [f"model {i}" for i in range(len(curves))] if labels is None else list(labels)
    fig, axes = _figure_and_axes(ax, 1, panel_size=(4.0, 3.6))
    a = axes[0]
    a.plot([0, 1], [0, 1], color="0.6", lw=1, ls=":")
    for c, (cov, label) in enumerate(zip(curves, labels, strict=True)):
        err = float(np.max(np.abs(cov - levels)))
        a.plot(levels, cov, color=_COLORS[c % len(_COLORS)], marker=".", label=f"{label} (max |cov − τ| {err:.3f})")
    a.set_xlabel("level τ")
    a.set_ylabel("share of y ≤ predicted τ-quantile")
    a.set_xlim(0, 1)
    a.set_ylim(0, 1)
    a.legend(fontsize=7, loc="upper left")
    if title:
        a.set_title(title, fontsize=9)
    return fig
