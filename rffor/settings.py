"""The settings of a random-feature fit (MATH.md §5): the one home of its options' defaults, choices, validation and
documentation.

:class:`RFSettings` is a frozen dataclass validated once, when it is made. Everything else derives from it:

- :func:`rffor.solvers.rff.fit_rff` takes one (or its fields as keyword arguments) and hands it to the routes;
- the estimators (:class:`rffor.FunctionalRegressor`, :class:`rffor.QuantileFunctionRegressor`) take their
  defaults from :data:`DEFAULTS`, their scikit-learn parameter constraints from :func:`sklearn_constraints`, their
  parameter documentation from :func:`parameter_docs`, and build the fit's settings with :meth:`RFSettings.from_params`;
- the command line builds its random-feature options from :func:`cli_options` (flags, types, choices, help);
- a checkpoint records :meth:`RFSettings.fingerprint` and refuses to resume a fit with other settings.

A new option is one field here (default, allowed values, documentation, optionally a command-line flag) plus the
module that reads it.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._validation import check_choice, check_dtype, check_int, check_real
from .executor import PARTITIONS_PER, SPLIT_EVERY
from .features import DEFAULT_OUTPUT_RANK_TOL

__all__ = [
    "RFSettings",
    "DEFAULTS",
    "DEFAULT_LAMS",
    "AUTO_EXACT_MAX_N",
    "DEFAULT_N_FEATURES_THETA",
    "SGD_INIT_MAX_ROWS",
    "AUTO_FEATURES_PER_SQRT_N",
    "AUTO_MIN_FEATURES",
    "Int",
    "Real",
    "Choice",
    "Grid",
    "option_names",
    "check_option",
    "sklearn_constraints",
    "parameter_docs",
    "cli_options",
]

#: above this many curves, ``solver="auto"`` uses random features (the exact dual holds an n × n Gram matrix)
AUTO_EXACT_MAX_N = 5000

#: the starting grid of ``lam="auto"``: decades 1e-2 … 1e-12 (features are normalised, ‖φ_X‖ ≤ 1, so the useful λ
#: depends on the data's size and noise, not on its units), extended past an end by the walk
DEFAULT_LAMS = tuple(10.0**-k for k in range(2, 13))

#: D_θ of random output features when ``n_features_theta`` is None
DEFAULT_N_FEATURES_THETA = 200

#: rows of the closed-form warm start and of the preconditioner's covariance of DSGD when ``init_max_rows`` is None
SGD_INIT_MAX_ROWS = 50_000

#: ``n_features_x="auto"``: c of M = ⌈c √n⌉ (FALKON's M ∝ √n, Rudi et al. 2017, keeps the statistical rate with
#: √n centres). The constant is the smallest M/√n past which more centres stopped lowering the best model of a fixed
#: (λ, κ) grid scored on clean test curves, in a design study on data of another seed than the reported learning
#: curve (benchmarks/learning_curve.py ``--seed 1 --centres 250 500 1000``, noise 1% of the signal's energy, 10% Type 2
#: outliers): oracle test NMSE at M = 250 / 500 / 1000: 8.52e-5 / 7.93e-5 / 7.92e-5 at n = 10⁴, 5.15e-5 / 3.58e-5 /
#: 3.67e-5 at n = 3·10⁴; M = 500 suffices at both, 5√n at 10⁴ (2.9√n at 3·10⁴), so c = 5
AUTO_FEATURES_PER_SQRT_N = 5.0

#: ``n_features_x="auto"``: at least this many features (or n, if fewer)
AUTO_MIN_FEATURES = 100


# ---------------------------------------------------------------------------------------------------------------
# allowed values: one vocabulary for validation, scikit-learn's constraints and the command line
# ---------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Int:
    """An integer in ``[low, high]`` (a bool is not one)."""

    low: int | None = None
    high: int | None = None

    def accepts(self, value) -> bool:
        return (
            not isinstance(value, (bool, np.bool_))
            and isinstance(value, numbers.Integral)
            and (self.low is None or value >= self.low)
            and (self.high is None or value <= self.high)
        )

    def check(self, value, name: str) -> int:
        return check_int(value, name, self.low, self.high)

    def sklearn(self):
        from sklearn.utils._param_validation import Interval

        closed = {(True, True): "both", (True, False): "left", (False, True): "right", (False, False): "neither"}
        return Interval(
            numbers.Integral, self.low, self.high, closed=closed[(self.low is not None, self.high is not None)]
        )

    def parse(self, text: str) -> int:
        return int(text)


@dataclass(frozen=True)
class Real:
    """A finite real number in an interval."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def accepts(self, value) -> bool:
        try:
            self.check(value, "value")
        except (TypeError, ValueError):
            return False
        return True

    def check(self, value, name: str) -> float:
        return check_real(value, name, low=self.low, high=self.high, low_open=self.low_open, high_open=self.high_open)

    def sklearn(self):
        from sklearn.utils._param_validation import Interval

        low = None if self.low == -math.inf else self.low
        high = None if self.high == math.inf else self.high
        low_closed, high_closed = low is not None and not self.low_open, high is not None and not self.high_open
        closed = {(True, True): "both", (True, False): "left", (False, True): "right", (False, False): "neither"}
        return Interval(numbers.Real, low, high, closed=closed[(low_closed, high_closed)])

    def parse(self, text: str) -> float:
        return float(text)


@dataclass(frozen=True)
class Choice:
    """One of a set of strings."""

    options: tuple[str, ...]

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.options

    def check(self, value, name: str) -> str:
        return check_choice(value, name, set(self.options))

    def sklearn(self):
        from sklearn.utils._param_validation import StrOptions

        return StrOptions(set(self.options))

    def parse(self, text: str) -> str:
        return text


@dataclass(frozen=True)
class Grid:
    """A non-empty sequence of positive finite numbers (a grid of a hyperparameter)."""

    min_length: int = 1

    def accepts(self, value) -> bool:
        return not isinstance(value, str) and isinstance(value, (Sequence, np.ndarray))

    def check(self, value, name: str) -> tuple[float, ...]:
        values = tuple(check_real(v, f"{name}[i]", low=0, low_open=True) for v in value)
        if len(values) < self.min_length:
            raise ValueError(f"{name} must hold at least {self.min_length} value(s), got {len(values)}")
        return values

    def sklearn(self):
        return "array-like"

    def parse(self, text: str) -> tuple[float, ...]:
        return tuple(float(v) for v in text.split(","))


@dataclass(frozen=True)
class Option:
    """What a field of :class:`RFSettings` accepts and how it is documented."""

    allowed: tuple  # alternatives: Int, Real, Choice, Grid, or None (the value None)
    doc: str
    type_doc: str
    cli: str | None = None  # the command line's flag (None: not on the command line)
    metavar: str | None = None
    brief: str | None = None  # the command line's help (plain text)


def _opt(default, *allowed, type_doc: str, doc: str, cli=None, metavar=None, brief=None):
    return field(default=default, metadata={"option": Option(tuple(allowed), doc, type_doc, cli, metavar, brief)})


def _check(name: str, value, option: Option):
    """``value`` normalised by the first alternative of ``option`` that accepts it; else the error of the most
    specific alternative (a number checked against its interval, a string against its choices)."""
    if value is None and None in option.allowed:
        return None
    kinds = [a for a in option.allowed if a is not None]
    for a in kinds:
        if a.accepts(value):
            return a.check(value, name)
    # the message users see: that of the alternative of the value's own kind
    for a in kinds:
        if isinstance(a, Choice) and isinstance(value, str):
            return a.check(value, name)
    for a in kinds:
        if isinstance(a, (Int, Real)) and isinstance(value, numbers.Number) and not isinstance(value, str):
            return a.check(value, name)
    for a in kinds:
        if isinstance(a, Grid) and not isinstance(value, (str, numbers.Number)):
            return a.check(value, name)
    expected = " or ".join(_describe(a) for a in option.allowed)
    raise ValueError(f"{name} must be {expected}, got {value!r}")


def _describe(a) -> str:
    if a is None:
        return "None"
    if isinstance(a, Choice):
        return " or ".join(repr(o) for o in a.options)
    if isinstance(a, Int):
        return "an integer" + (f" >= {a.low}" if a.low is not None else "")
    if isinstance(a, Real):
        return "a number"
    return "a sequence of positive numbers"


# ---------------------------------------------------------------------------------------------------------------
# the settings
# ---------------------------------------------------------------------------------------------------------------

_SGD_PER_WORKER = (
    "partitions_per='worker' shares a partition's chunks among a worker's threads; a DSGD partition is one sequential "
    "chain of steps (rff_method='sgd', or level_sampling): use partitions_per='thread' (one partition per worker "
    "thread; on workers of many threads a task runs split_every partitions at once)"
)


@dataclass(frozen=True)
class RFSettings:
    """Every option of a random-feature fit (MATH.md §5), validated when made (a ValueError or TypeError names the
    option and what it accepts). The model itself (loss, kernels, random state) is not an option: it is given to
    :func:`rffor.solvers.rff.fit_rff` beside the settings."""

    lam: float | str = _opt(
        1e-4, Real(0, low_open=True), Choice(("auto",)), type_doc='float or "auto"',
        doc="λ > 0 of (P_rf), or \"auto\": chosen on held-out curves (:mod:`rffor.solvers.selection`: the grid "
        "``lams`` in closed form, then a walk past its best value, every candidate of a robust loss fitted by MM "
        "passes warm-started at its neighbour's model), then fitted on all curves; the choice is ``lam_`` (estimators) "
        "or ``RFFResult.lam``. Not with ``rff_method=\"sgd\"``.",
    )  # fmt: skip
    lams: tuple | None = _opt(
        None, Grid(min_length=2), None, type_doc="sequence of float or None",
        doc="The starting grid of ``lam=\"auto\"`` (None: :data:`rffor.settings.DEFAULT_LAMS`, 1e-2 … 1e-12; the walk "
        "continues past its ends).",
    )  # fmt: skip
    loss_params: Any = _opt(
        None, Choice(("auto",)), Grid(), None, type_doc='None, "auto" or sequence of float', cli="--loss-params",
        metavar="auto|K1,K2,...",
        brief="with --lam auto: also choose the loss's κ or ε on the held-out curves, walking from "
        "--kappa/--epsilon (auto: by half decades) or along the given values",
        doc="With ``lam=\"auto\"``: also choose the loss's κ or ε (:attr:`rffor.losses.Loss.param_name`) on the same "
        "held-out curves, walking from the loss's own value (\"auto\": by half decades; a sequence: along its values, "
        "continued past its ends).",
    )  # fmt: skip
    kernel_theta_params: Any = _opt(
        None, Choice(("auto",)), Grid(), None, type_doc='None, "auto" or sequence of float',
        cli="--kernel-theta-params", metavar="auto|G1,G2,...",
        brief="with --lam auto: also choose the γ of the output kernel on the held-out curves, walking from "
        "--kernel-theta's (auto: by half decades) or along the given values",
        doc="With ``lam=\"auto\"``: also choose the bandwidth γ of the output kernel k_Θ on the same held-out curves, "
        "walking from k_Θ's own (\"auto\": by half decades; a sequence: along its values, continued past its ends). "
        "Every γ tried has its own output factor; the input features the workers cached and the sums of the raw "
        "outputs serve them all. γ_Θ sets the smoothness of the fitted curves along θ: a k_Θ smoother than the "
        "data holds every model above the error of projecting the curves on its factor.",
    )  # fmt: skip
    holdout: int = _opt(
        10, Int(2), type_doc="int",
        doc="``lam=\"auto\"``: about one curve in ``holdout`` is held out to score the candidates "
        "(:class:`rffor.chunked.RowSplit`).",
    )  # fmt: skip
    selection_rows: int | None = _opt(
        200_000, Int(1), None, type_doc="int or None",
        doc="``lam=\"auto\"`` on more curves than this: the selection runs on the curves of whole chunks spread "
        "evenly over the data, about this many, and the selected λ is scaled by the ratio of those curves to all "
        "curves for the fit on all of them (λ·n constant for a finite-dimensional model); a robust loss's MM passes "
        "on all curves then use the feature covariance of the selection's curves as their metric. None: select on "
        "all curves.",
    )  # fmt: skip
    n_features_x: int | str = _opt(
        1000, Int(2), Choice(("auto",)), type_doc='int or "auto"', cli="--features-x", metavar="D|auto",
        brief=f"random features of k_X (even), or Nyström centres M; auto: M = {AUTO_FEATURES_PER_SQRT_N:g}√n within "
        "--max-features-x",
        doc="D_x (even) for random features of k_X; the number of Nyström centres M (at most n) for Nyström "
        "features, which keep every direction of the centres' span (D_x = M). \"auto\": grows with the number of "
        "training curves n, ``M = ⌈c √n⌉`` with c = :data:`rffor.settings.AUTO_FEATURES_PER_SQRT_N` (FALKON's "
        "M ∝ √n; the constant measured on noisy curves in benchmarks/learning_curve.py), at least "
        ":data:`rffor.settings.AUTO_MIN_FEATURES` and at most ``max_features_x`` and n (rounded up to even for "
        "random features); the number used is ``RFFResult.input_features.n_features`` (the estimators' "
        "``n_features_x_``).",
    )  # fmt: skip
    max_features_x: int = _opt(
        2000, Int(2), type_doc="int", cli="--max-features-x", metavar="M",
        brief="with --features-x auto: at most this many features (the memory and time budget)",
        doc="``n_features_x=\"auto\"``: at most this many features, the budget of memory and time: a gradient "
        "pass costs about 2·n·M·(d + 2 D_θ) flops (Nyström features on their kernel basis, random features alike) "
        "when its rows are not cached, a pass of feature sums (the closed form, the selection's split) about "
        "n·M·(2d + 2M), the feature cache holds n·M·8 bytes (float64) to keep kernel blocks between passes "
        "(``feature_cache``), and the driver "
        "eigendecomposes M × M matrices. The default 2000 keeps a robust fit on 10⁶ curves of 100 points within "
        "about 10 minutes on 2 cores (benchmarks/learning_curve.py). Ignored for an integer ``n_features_x``.",
    )  # fmt: skip
    input_features: str = _opt(
        "auto", Choice(("auto", "rff", "orf", "nystrom")), type_doc='{"auto", "rff", "orf", "nystrom"}',
        cli="--input-features",
        brief="random Fourier, orthogonal random or Nyström features of k_X; auto: Nyström for the closed form "
        "and MM, random Fourier features for sgd",
        doc="φ_X: random Fourier features (Rahimi & Recht), orthogonal random features (Yu et al. 2016, Gaussian "
        "kernel), or the Nyström map on ``n_features_x`` centres drawn uniformly from the training curves (read by "
        "the partition tasks; FALKON's uniform centres). Nyström adapts to the inputs: on curve data near a "
        "low-dimensional set it is far more accurate per feature (benchmarks/learning_curve.py). \"auto\": Nyström "
        "for the full-batch routes (closed form and MM passes, whose features are computed once and cached), random "
        "Fourier features for ``rff_method=\"sgd\"``, whose steps compute the features of every minibatch again "
        "(Nyström costs M·(d + M) per row, random features D·d).",
    )  # fmt: skip
    output_features: str = _opt(
        "exact", Choice(("exact", "rff")), type_doc='{"exact", "rff"}',
        doc="φ_Θ: the exact factor of K_Θ on the grid (operator random Fourier features, rank by "
        "``output_rank_tol``) or random output features (``n_features_theta`` of them).",
    )  # fmt: skip
    n_features_theta: int | None = _opt(
        None, Int(2), None, type_doc="int or None",
        doc="D_θ for ``output_features=\"rff\"`` (None: :data:`rffor.settings.DEFAULT_N_FEATURES_THETA`, 200).",
    )  # fmt: skip
    output_rank_tol: float = _opt(
        DEFAULT_OUTPUT_RANK_TOL, Real(0, 1), type_doc="float",
        doc="Exact output factor: keep the eigenpairs of K_Θ with t_j > tol · t_max "
        "(:data:`rffor.features.DEFAULT_OUTPUT_RANK_TOL` says why so low).",
    )  # fmt: skip
    rff_method: str = _opt(
        "auto", Choice(("auto", "closed_form", "mm", "sgd")), type_doc='{"auto", "closed_form", "mm", "sgd"}',
        cli="--method",
        brief="closed_form (square loss, one pass), mm (full-batch majorize-minimize passes) or sgd (rounds of "
        "local SGD); auto: closed_form for the square loss, mm otherwise",
        doc="The route (:data:`rffor.solvers.routes.ROUTES`). \"closed_form\": square loss only, the one-pass closed "
        "form on filled outputs. \"mm\": full-batch majorize–minimize passes from the square-loss closed form (every "
        "pass a map-reduce of the gradient where the data is; converges to the optimum of (P_rf) for every smooth "
        "loss). \"sgd\": rounds of local doubly stochastic gradient steps with parameter averaging, from a "
        "(reweighted) closed form on a sample of curves. \"auto\": \"closed_form\" for the square loss (then \"mm\" "
        "if outputs are missing), \"sgd\" when levels are drawn (``level_sampling``), \"mm\" otherwise.",
    )  # fmt: skip
    tol: float = _opt(
        1e-6, Real(0), type_doc="float",
        doc="MM passes (the final fit's and the selection's candidates'): stop when the majorizer promises a decrease "
        "of the objective below ``tol`` × J.",
    )  # fmt: skip
    max_passes: int = _opt(
        300, Int(1), type_doc="int",
        doc="MM: at most this many passes over the data; stopping there warns (ConvergenceWarning). A converged fit "
        "stops long before (1 to 4 passes from the selected candidate in benchmarks/learning_curve.py); a cold start "
        "at small κ and λ needs more (benchmarks/robustness.py: median 55, at most 234).",
    )  # fmt: skip
    batch_size: int = _opt(
        256, Int(1), type_doc="int", cli="--batch-size", metavar="B", brief="sgd: curves per step",
        doc="DSGD: curves per step.",
    )  # fmt: skip
    n_epochs: float = _opt(
        10, Real(0, low_open=True), type_doc="float", cli="--epochs", metavar="E", brief="sgd: passes over the data",
        doc="DSGD: passes over the data (per partition: ``ceil(n_epochs · E)`` steps with E the steps of an epoch of "
        "the largest partition).",
    )  # fmt: skip
    max_steps: int | None = _opt(
        None, Int(1), None, type_doc="int or None", doc="DSGD: cap on the steps per partition."
    )
    n_theta_samples: int | None = _opt(
        None, Int(1), None, type_doc="int or None",
        doc="DSGD, integral losses: s levels per step, grid columns (None: all observed) or, with ``level_sampling``, "
        "levels drawn from μ (None: 8). A step then costs O(b·s·D_θ) instead of O(b·m·D_θ).",
    )  # fmt: skip
    level_sampling: str | None = _opt(
        None, Choice(("uniform", "sobol", "gauss-legendre", "grid")), None,
        type_doc='{"uniform", "sobol", "gauss-legendre", "grid"} or None',
        doc="Quantile functions (scalar targets seen on a grid of levels): DSGD steps draw their levels from μ "
        "anywhere in [0, 1] (:class:`rffor.solvers.dsgd.LevelSampler`) and read the scalar targets; \"grid\": s of "
        "the grid's levels per step (joint quantile regression at given levels). None: grid columns.",
    )  # fmt: skip
    lam_nc: float = _opt(
        0.0, Real(0), type_doc="float",
        doc="λ_nc of the non-crossing penalty at the DSGD steps' levels (``level_sampling`` and DSGD only).",
    )  # fmt: skip
    step_size: float | str = _opt(
        "auto", Real(0, low_open=True), Choice(("auto",)), type_doc='float or "auto"',
        doc="DSGD: η₀; \"auto\" is :func:`rffor.solvers.rounds.auto_step_size` (divided by ``max(1, trace/b)`` when "
        "preconditioned).",
    )  # fmt: skip
    step_decay: float = _opt(
        0.0, Real(0, 1), type_doc="float",
        doc="DSGD: the schedule ``η_t = η₀ / (1 + t/t₀)^step_decay``; the default 0 is a constant step, which with "
        "suffix averaging converged fastest in our measurements.",
    )  # fmt: skip
    step_offset: float | None = _opt(
        None, Real(0, low_open=True), None, type_doc="float or None", doc="DSGD: t₀ of the schedule (None: 1/(η₀ λ)).",
    )  # fmt: skip
    average_start: int | str = _opt(
        "auto", Int(0), Choice(("auto",)), type_doc='int or "auto"',
        doc="DSGD: step from which the iterates are averaged; \"auto\": half the planned steps (suffix averaging, "
        "Rakhlin et al. 2012), which forgets the start-up transient.",
    )  # fmt: skip
    local_steps: int | None = _opt(
        None, Int(1), None, type_doc="int or None",
        doc="DSGD: K, steps per round between averages (None: one epoch of the largest partition).",
    )  # fmt: skip
    n_partitions: int | None = _opt(
        None, Int(1), None, type_doc="int or None",
        doc="P, partitions of whole chunks (None: the executor's: 1 in process, the worker threads on Dask; the "
        "checkpoint's when resuming). P, not the number of workers, defines the model: pass it for results that do "
        "not depend on the machine.",
    )  # fmt: skip
    init: str = _opt(
        "closed_form", Choice(("closed_form", "zeros")), type_doc='{"closed_form", "zeros"}',
        doc="DSGD: start from the square-loss closed form or from zero.",
    )  # fmt: skip
    init_max_rows: int | None = _opt(
        None, Int(1), None, type_doc="int or None",
        doc="Curves of the closed-form warm start of DSGD and of its preconditioner's covariance, in whole chunks "
        "spread evenly over the data (None: :data:`rffor.settings.SGD_INIT_MAX_ROWS`, 50,000; the full-batch routes: "
        "all curves).",
    )  # fmt: skip
    init_reweight: int = _opt(
        10, Int(0), type_doc="int", cli="--reweight", metavar="N",
        brief="sgd, Huber losses: refine the closed-form warm start by at most N reweighted closed forms (0: "
        "none)",
        doc="DSGD, losses that offer IRLS weights (the Huber losses) with ``init=\"closed_form\"``: refine the warm "
        "start by at most this many reweighted closed forms on the same curves "
        "(:func:`rffor.solvers.warm_start.reweighted_closed_form`). 0: the square-loss closed form.",
    )  # fmt: skip
    precondition_rank: int = _opt(
        50, Int(0), type_doc="int", cli="--precondition", metavar="RANK",
        brief="sgd: precondition the steps by (C_X + λI)^-1 on RANK eigenvectors (0: plain steps)",
        doc="DSGD: k > 0 preconditions the steps by ``(C_X + λI)^{-1}`` on the top k eigenvectors of the input "
        "feature covariance of the warm-start curves (:class:`rffor.solvers.dsgd.Preconditioner`); 0: plain steps.",
    )  # fmt: skip
    dtype: str | None = _opt(
        None, Choice(("float32", "float64")), None, type_doc='{"float32", "float64"} or None', cli="--dtype",
        brief="float type of the features and B (default float64 for Nyström, float32 for random features)",
        doc="Type of the features and of B. None: float32 for random features (7x faster sines and cosines, as "
        "accurate at their error level), float64 for Nyström (its whitening amplifies rounding by up to "
        "1/sqrt(1e-14): measured, a float32 map kept rank 430 of M = 1000 where float64 kept 740, 20x lower test "
        "error).",
    )  # fmt: skip
    split_every: int = _opt(
        SPLIT_EVERY, Int(2), type_doc="int",
        doc="Fan-in s of the fixed tree by which the partitions' partial results (closed-form factors, gradient sums, "
        "DSGD states) merge on the workers (MATH.md §5.2): the driver receives one result per pass and makes no "
        "merge; the tree has depth ceil(log_s P) and a critical path of (s − 1)·ceil(log_s P) merges. With s ≥ P it "
        "is one left fold in partition order. Part of the model's definition for a given P (the merge order sets "
        "the rounding): a fit is bit-identical on every executor for the same P and s.",
    )  # fmt: skip
    partitions_per: str = _opt(
        "thread", Choice(PARTITIONS_PER), type_doc='{"thread", "worker"}',
        doc="How partitions map onto a Dask cluster. \"thread\": one single-threaded task per partition, P defaults "
        "to the cluster's worker threads. \"worker\": P defaults to the number of workers, and a worker of T threads "
        "runs each full-batch pass's task (closed-form sums, MM gradients, the selection's passes) on a pool of its "
        "T threads, chunk by chunk, each chunk's result folded in chunk order (:func:`rffor.executor.fold_chunks`: "
        "the same bits for any T): tasks, merges and driver messages per pass then grow with the workers, not the "
        "cores. In this process (no Dask) \"worker\" uses the CPUs of the process the same way. Part of the model's "
        "definition for a given P (the per-chunk fold sets the rounding). DSGD rounds, whose partition is one "
        "sequential chain of steps, need \"thread\": on workers whose threads are a multiple of ``split_every``, a "
        "task then runs a group of ``split_every`` partitions (the merge tree's first level) on the worker's "
        "threads, so a round has P / ``split_every`` leaf tasks, with the same bits.",
    )  # fmt: skip
    feature_cache: int = _opt(
        2**32, Int(0), type_doc="int",
        doc="Bytes of input features each process running the passes (this one, or every Dask worker) keeps between "
        "passes (:mod:`rffor.solvers.feature_cache`); blocks past the budget are recomputed every pass. 0: none. "
        "Changes the time, never the result.",
    )  # fmt: skip

    # ----------------------------------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _check(f.name, getattr(self, f.name), f.metadata["option"])
            if isinstance(value, np.ndarray):
                value = tuple(value.tolist())
            object.__setattr__(self, f.name, value)
        if self.dtype is not None:
            object.__setattr__(self, "dtype", check_dtype(self.dtype).name)
        if self.lam == "auto" and self.rff_method == "sgd":
            raise ValueError(
                "lam='auto' selects λ with closed forms and MM passes; it needs rff_method 'auto', 'mm' or "
                "'closed_form', not 'sgd'"
            )
        for name in ("loss_params", "kernel_theta_params"):
            value = getattr(self, name)
            if value is not None and self.lam != "auto":
                raise ValueError(f"{name}={value!r} needs lam='auto' (both are chosen on the same held-out rows)")
        if self.level_sampling is not None and self.rff_method not in ("auto", "sgd"):
            raise ValueError(
                f"level_sampling is for the DSGD steps (rff_method 'sgd' or 'auto'), got {self.rff_method!r}"
            )
        if self.partitions_per == "worker" and self.rff_method == "sgd":
            raise ValueError(_SGD_PER_WORKER)
        if self.lam_nc > 0 and (self.level_sampling is None or self.rff_method == "mm"):
            raise ValueError("the non-crossing penalty of the random-feature path needs DSGD with level_sampling")

    def check_model(self, loss, kernel_theta) -> None:
        """The checks that need the model: ``rff_method="closed_form"`` needs the square loss; ``loss_params`` a
        loss with a κ or ε (a positive finite start for "auto"); ``kernel_theta_params`` a k_Θ with a bandwidth."""
        if self.rff_method == "closed_form" and not loss.is_square:
            raise ValueError(f"rff_method='closed_form' is for the square loss only, got {loss!r}")
        if self.loss_params is not None:
            if loss.param_name is None:
                raise ValueError(f"loss_params: {loss!r} has no κ or ε to choose")
            start = float(getattr(loss, loss.param_name))
            if self.loss_params == "auto" and not 0 < start < math.inf:
                raise ValueError(
                    f"loss_params='auto' walks from the loss's own {loss.param_name} by factors of √10: it must be a "
                    f"positive finite number, got {loss!r}"
                )
        if self.kernel_theta_params is not None and kernel_theta is not None and kernel_theta.param_name is None:
            raise ValueError(f"kernel_theta_params: {kernel_theta!r} has no bandwidth γ to choose")

    # ----------------------------------------------------------------------------------------- derived values
    def route(self, loss) -> str:
        """The route "auto" means (:data:`rffor.solvers.routes.ROUTES`): DSGD when levels are drawn
        (``level_sampling``), the closed form for the square loss (MM finishes it if outputs are missing), MM
        passes for every other loss."""
        if self.rff_method != "auto":
            return self.rff_method
        if self.level_sampling is not None:
            return "sgd"
        return "closed_form" if loss.is_square else "mm"

    def resolved(self, loss) -> RFSettings:
        """These settings with ``input_features`` and ``dtype`` resolved for ``loss``'s route: "auto" input features
        are Nyström for the full-batch routes and random Fourier features for DSGD; the default dtype is float64 for
        Nyström, float32 otherwise."""
        if self.partitions_per == "worker" and self.route(loss) == "sgd":
            raise ValueError(_SGD_PER_WORKER)
        features = self.input_features
        if features == "auto":
            features = "rff" if self.route(loss) == "sgd" else "nystrom"
        if features in ("rff", "orf") and self.n_features_x != "auto" and self.n_features_x % 2:
            raise ValueError(
                f"n_features_x must be even for random Fourier features (a cosine and a sine per frequency), got "
                f"{self.n_features_x}"
            )
        dtype = self.dtype or ("float64" if features == "nystrom" else "float32")
        return dataclasses.replace(self, input_features=features, dtype=dtype)

    def n_features_for(self, n: int) -> int:
        """D_x of a fit on ``n`` curves: ``n_features_x``, or for "auto" ``⌈c √n⌉``
        (c = :data:`AUTO_FEATURES_PER_SQRT_N`) clipped to ``[AUTO_MIN_FEATURES, max_features_x]`` and to n, made
        even for random Fourier features (up, or down at the cap). Nyström features draw at most n centres
        whatever the value."""
        if self.n_features_x != "auto":
            return int(self.n_features_x)
        n = check_int(n, "n", 1)
        M = min(max(math.ceil(AUTO_FEATURES_PER_SQRT_N * math.sqrt(n)), AUTO_MIN_FEATURES), self.max_features_x, n)
        if self.input_features in ("rff", "orf") and M % 2:
            M = M + 1 if M + 1 <= self.max_features_x else M - 1
        return int(M)

    @property
    def grid_lams(self) -> tuple[float, ...]:
        """The starting λ grid of ``lam="auto"``."""
        return DEFAULT_LAMS if self.lams is None else self.lams

    def loss_param_grid(self, loss) -> list[float] | None:
        """The grid of the loss's κ or ε to walk along (None: fixed): ``[its own value]`` for "auto"."""
        if self.loss_params is None:
            return None
        return [float(getattr(loss, loss.param_name))] if self.loss_params == "auto" else list(self.loss_params)

    def kernel_param_grid(self, kernel_theta) -> list[float] | None:
        """The grid of k_Θ's bandwidth to walk along (None: fixed): ``[its own value]`` for "auto"."""
        if self.kernel_theta_params is None:
            return None
        if self.kernel_theta_params == "auto":
            return [float(getattr(kernel_theta, kernel_theta.param_name))]
        return list(self.kernel_theta_params)

    def warm_rows(self, n: int, route: str) -> int:
        """Curves of a warm start or covariance computed apart (``init_max_rows``; default all curves for the
        full-batch routes, :data:`SGD_INIT_MAX_ROWS` for DSGD)."""
        if self.init_max_rows is not None:
            return self.init_max_rows
        return n if route in ("mm", "closed_form") else SGD_INIT_MAX_ROWS

    # ----------------------------------------------------------------------------------------- conversions
    @classmethod
    def from_params(cls, params: dict, **renamed: str) -> RFSettings:
        """The settings of the fields found in ``params`` (e.g. an estimator's ``get_params()``); ``renamed`` maps a
        field to the parameter that holds it (``max_passes="max_iter"``; a None value there means the default)."""
        names = option_names()
        kw = {k: v for k, v in params.items() if k in names and k not in renamed}
        for field_name, param in renamed.items():
            if params.get(param) is not None:
                kw[field_name] = params[param]
        return cls(**kw)

    def replace(self, **changes) -> RFSettings:
        """A copy with some options changed (validated again)."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """``{option: value}``, JSON-ready (grids as lists)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()}

    def fingerprint(self) -> dict:
        """What a checkpoint records of these settings (:func:`rffor.checkpoint.fingerprint`): every option but
        ``feature_cache`` (which changes the time, never the result) and ``n_partitions`` (recorded apart)."""
        out = self.to_dict()
        out.pop("feature_cache")
        out.pop("n_partitions")
        return out


#: the defaults, as an instance (``DEFAULTS.batch_size``)
DEFAULTS = RFSettings()


def check_option(name: str, value):
    """``value`` validated and normalised as option ``name`` of :class:`RFSettings` (the error names the option):
    for the objects a fit builds from the settings' values (:class:`rffor.solvers.dsgd.SGDConfig`)."""
    fields = {f.name: f for f in dataclasses.fields(RFSettings)}
    return _check(name, value, fields[name].metadata["option"])


def option_names() -> tuple[str, ...]:
    """The names of :class:`RFSettings`' options."""
    return tuple(f.name for f in dataclasses.fields(RFSettings))


def _options(names: Iterable[str] | None = None) -> list[tuple[str, Option, Any]]:
    fields = {f.name: f for f in dataclasses.fields(RFSettings)}
    chosen = list(fields) if names is None else list(names)
    return [(n, fields[n].metadata["option"], fields[n].default) for n in chosen]


def sklearn_constraints(names: Iterable[str] | None = None) -> dict:
    """scikit-learn ``_parameter_constraints`` of the given options (default all)."""
    return {n: [None if a is None else a.sklearn() for a in opt.allowed] for n, opt, _ in _options(names)}


def parameter_docs(names: Iterable[str] | None = None, *, indent: int = 4) -> str:
    """numpydoc entries ``name : type, default value`` + the option's documentation, for an estimator's docstring."""
    import textwrap

    pad = " " * indent
    out = []
    for n, opt, default in _options(names):
        out.append(f"{pad}{n} : {opt.type_doc}, default {default!r}")
        out.append(textwrap.fill(opt.doc, 116 - indent, initial_indent=pad + "    ", subsequent_indent=pad + "    "))
    return "\n".join(out)


def cli_options() -> list[dict]:
    """The options the command line exposes: ``{"name", "flag", "type", "choices", "metavar", "help", "default"}``
    (``type`` parses and validates a string; ``help`` ends with the default)."""
    out = []
    for n, opt, default in _options():
        if opt.cli is None:
            continue
        kinds = [a for a in opt.allowed if a is not None]
        choices = [o for a in kinds if isinstance(a, Choice) for o in a.options] or None
        numeric = [a for a in kinds if not isinstance(a, Choice)]

        def parse(text, _n=n, _opt=opt, _numeric=numeric):
            if _numeric and not any(text == o for a in _opt.allowed if isinstance(a, Choice) for o in a.options):
                value = _numeric[0].parse(text)
            else:
                value = text
            return _check(_n, value, _opt)

        out.append(
            {
                "name": n,
                "flag": opt.cli,
                "type": parse,
                "choices": None if numeric else choices,
                "metavar": opt.metavar,
                "help": (opt.brief or opt.doc) + ("" if default is None else f" (default {default!r})"),
                "default": default,
            }
        )
    return out
