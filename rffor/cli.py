"""The ``rffor`` command line: ``demo``, ``make-data``, ``fit``, ``predict``, ``evaluate``, ``info``.

Run ``rffor COMMAND --help`` for the options of each command. Exit status: 0 on success, 1 when the work fails
(a missing or malformed file, a failed fit), 2 on a usage error (a bad option or value), 130 when interrupted.
Errors are one line on stderr; ``--debug`` shows the traceback instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

import numpy as np

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: defaults of ``rffor demo`` (full run / --quick)
DEMO_DEFAULTS = {
    "full": {"n": 50_000, "n_test": 500, "m": 50},
    "quick": {"n": 600, "n_test": 50, "m": 20},
}


class UsageError(Exception):
    """A bad combination of options found after parsing (exit status 2)."""


# -------------------------------------------------------------------------------------------------------------
# argument types (argparse turns their ValueError / ArgumentTypeError into a usage error, exit 2)
# -------------------------------------------------------------------------------------------------------------


def _int_at_least(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value

    parse.__name__ = f"integer >= {minimum}"
    return parse


def _float_in(low: float, high: float = math.inf, *, low_open: bool = False):
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value) or value < low or (low_open and value == low) or value > high:
            interval = (
                f"{'(' if low_open else '['}{low}, {high}]" if high < math.inf else f"{'>' if low_open else '>='} {low}"
            )
            raise argparse.ArgumentTypeError(f"expected a finite number {interval}, got {text!r}")
        return value

    return parse


def _lam(text: str):
    """λ > 0, or "auto" (chosen on held-out curves: the random-feature solver)."""
    return "auto" if text == "auto" else _float_in(0, low_open=True)(text)


def _kernel(text: str):
    from .kernels import kernel_from_spec

    try:
        return kernel_from_spec(text)
    except (ValueError, TypeError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def parse_outliers(text: str) -> dict | None:
    """``none`` or ``TYPE:TAU[:PARAM]`` (MATH.md §7): TYPE 1, 2 or 3; TAU the corrupted fraction in [0, 1];
    PARAM is ζ (Type 2 intensity, default 2) or ξ (Type 3 fraction of each curve, default 0.5)."""
    if text.strip().lower() in ("none", "0", ""):
        return None
    parts = text.split(":")
    if len(parts) not in (2, 3):
        raise argparse.ArgumentTypeError(f"expected TYPE:TAU[:PARAM] (e.g. 2:0.1 or 3:0.2:0.3) or none, got {text!r}")
    kind = parts[0].strip().lower().removeprefix("type")
    if kind not in ("1", "2", "3"):
        raise argparse.ArgumentTypeError(f"outlier TYPE must be 1, 2 or 3, got {parts[0]!r}")
    try:
        tau = float(parts[1])
        param = float(parts[2]) if len(parts) == 3 else None
    except ValueError:
        raise argparse.ArgumentTypeError(f"outlier TAU and PARAM must be numbers, got {text!r}") from None
    if not 0 <= tau <= 1:
        raise argparse.ArgumentTypeError(f"outlier fraction TAU must be in [0, 1], got {tau}")
    spec = {"kind": int(kind), "tau": tau}
    if param is not None:
        if kind == "1":
            raise argparse.ArgumentTypeError("Type 1 outliers take no PARAM (use 1:TAU)")
        if kind == "2":
            if not (math.isfinite(param) and param >= 0):
                raise argparse.ArgumentTypeError(f"Type 2 intensity ζ must be >= 0, got {param}")
            spec["zeta"] = param
        else:
            if not 0 <= param <= 1:
                raise argparse.ArgumentTypeError(f"Type 3 fraction ξ must be in [0, 1], got {param}")
            spec["xi"] = param
    return spec


def _argparse_type(parse, flag: str):
    """An argparse type from a settings option's parser: its ValueError / TypeError message becomes the usage error."""

    def wrapped(text: str):
        try:
            return parse(text)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    wrapped.__name__ = flag.lstrip("-")
    return wrapped


def _features_theta(text: str):
    if text.strip().lower() == "exact":
        return "exact"
    value = _int_at_least(2)(text)
    if value % 2:
        raise argparse.ArgumentTypeError(f"the number of random output features must be even, got {value}")
    return value


def outlier_label(spec: dict | None) -> str:
    if spec is None:
        return "no outliers"
    extra = f", ζ={spec['zeta']:g}" if "zeta" in spec else f", ξ={spec['xi']:g}" if "xi" in spec else ""
    return f"{spec['tau']:.0%} Type {spec['kind']} outliers{extra}"


def _corrupt(Y: np.ndarray, spec: dict | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from .datasets import add_outliers

    if spec is None:
        return Y, np.zeros(0, dtype=np.int64)
    kwargs = {k: spec[k] for k in ("xi", "zeta") if k in spec}
    rng = np.random.SeedSequence(seed, spawn_key=(1,))
    return add_outliers(Y, spec["kind"], spec["tau"], random_state=rng, **kwargs)


# -------------------------------------------------------------------------------------------------------------
# small helpers
# -------------------------------------------------------------------------------------------------------------


def _say(args, *lines: str) -> None:
    if not getattr(args, "quiet", False):
        for line in lines:
            print(line, flush=True)


def _loss_from_args(args):
    from .losses import LOSS_ALIASES, loss_from_spec

    name, extra = LOSS_ALIASES[args.loss]
    spec = {"name": name, **extra}
    if name == "pinball":  # both optional: ε-insensitivity (seed 001) and κ-smoothing (thesis 003 §5.4.2)
        spec.update({k: v for k, v in (("epsilon", args.epsilon), ("kappa", args.kappa)) if v is not None})
        return loss_from_spec(spec)
    for option in ("levels", "noncrossing"):
        if getattr(args, option, None) is not None:
            raise UsageError(f"--{option} is for quantile functions (--loss pinball), not --loss {args.loss}")
    # the loss's own hyperparameter (its default instance says which), never its name
    wants = loss_from_spec(spec).param_name
    for option, what in (("kappa", "the Huber threshold or the Welsch scale"), ("epsilon", "the insensitive width")):
        value = getattr(args, option)
        if wants == option:
            if value is None or (option == "kappa" and value == 0):
                raise UsageError(f"--loss {args.loss} needs --{option}{' > 0' if option == 'kappa' else ''} "
                                 f"({what}, in the units of the outputs)")  # fmt: skip
            spec[option] = value
        elif value is not None:
            takers = [a for a, (n, e) in LOSS_ALIASES.items() if n == "pinball"
                      or loss_from_spec({"name": n, **e}).param_name == option]  # fmt: skip
            raise UsageError(f"--{option} is for {', '.join(takers)}, not --loss {args.loss}")
    return loss_from_spec(spec)


def describe_loss(loss) -> str:
    spec = loss.to_spec()
    if spec["name"] == "square":
        return "square"
    if spec["name"] == "huber":
        return f"huber{spec['p']} (κ={spec['kappa']:g})"
    if spec["name"] == "pinball":
        extra = [f"{k}={spec[k]:g}" for k in ("epsilon", "kappa") if spec[k]]
        return "pinball" + (f" ({', '.join(extra)})" if extra else "")
    if spec["name"] == "welsch":
        return f"welsch (κ={spec['kappa']:g})"
    return f"eps{spec['p']} (ε={spec['epsilon']:g})"


def _open_dataset(path: str):
    from . import data

    if not os.path.exists(path) and "://" not in path:
        raise FileNotFoundError(f"no dataset at {path!r}")
    return data.open(path)


def _predict_block(est, X: np.ndarray, theta: np.ndarray | None) -> np.ndarray:
    Y_hat = np.asarray(est.predict(np.asarray(X, dtype=np.float64), theta=theta))
    return Y_hat.reshape(X.shape[0], -1)


def _prediction_grid(est, theta_data: np.ndarray) -> np.ndarray | None:
    """None when the data's grid is the training grid (predict on it), else the data's grid."""
    theta_fit = np.asarray(est.theta_)
    if theta_fit.shape == theta_data.shape and np.array_equal(theta_fit, theta_data):
        return None
    return theta_data


#: the levels at which ``rffor evaluate`` scores a quantile model (thesis 003 Table 5.1)
EVALUATION_LEVELS = (0.1, 0.3, 0.5, 0.7, 0.9)


def _is_quantile(est) -> bool:
    return hasattr(est, "levels_")


def evaluate_quantiles(est, ds) -> dict:
    """Pinball loss (summed over :data:`EVALUATION_LEVELS`, and averaged over the model's training levels: the
    integral pinball loss), crossing of the model itself (``rearrange`` off) at both, and calibration
    ``max |coverage − τ|`` at the 5 levels, of a quantile model on a dataset of scalar targets (m = 1)."""
    from .metrics import calibration_error, crossing_loss, pinball_loss

    if ds.m != 1:
        raise ValueError(f"a quantile model is evaluated on scalar targets (m = 1), the dataset has m = {ds.m}")
    X, Y = ds.read()
    X, y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)[:, 0]
    tau, grid = np.array(EVALUATION_LEVELS), est.levels_
    Q5, Qm = est.predict(X, levels=tau), est.predict(X, levels=grid)
    raw5, rawm = est.predict_raw(X, tau), est.predict_raw(X, grid)
    return {
        "n": int(len(y)),
        "levels": list(EVALUATION_LEVELS),
        "pinball": pinball_loss(y, Q5, tau),
        "integral_pinball": pinball_loss(y, Qm, grid, average=True),
        "crossing": crossing_loss(raw5),
        "crossing_training_levels": crossing_loss(rawm),
        "calibration_error": calibration_error(y, Q5, tau),
        "rearrange": bool(est.rearrange),
    }


def evaluate_model(est, ds) -> dict:
    """MSE, NMSE (MATH.md §7) and R² (as ``FunctionalRegressor.score``) over the observed entries of a dataset,
    computed chunk by chunk (:class:`rffor.metrics.CurveScores`); for a quantile model,
    :func:`evaluate_quantiles`."""
    from .metrics import CurveScores

    if _is_quantile(est):
        return evaluate_quantiles(est, ds)
    theta = _prediction_grid(est, ds.theta)
    scores = CurveScores(ds.m)
    for _, X_i, Y_i in ds.iter_chunks():
        scores.add(Y_i, _predict_block(est, X_i, theta))
    return scores.as_dict()


def _format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned first column, right-aligned others."""
    table = [[str(c) for c in header], *[[str(c) for c in r] for r in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]

    def fmt(r: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))

    return "\n".join([fmt(table[0]), "  ".join("-" * w for w in widths), *(fmt(r) for r in table[1:])])


def _human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"  # pragma: no cover


def _path_size(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


# -------------------------------------------------------------------------------------------------------------
# make-data
# -------------------------------------------------------------------------------------------------------------


def cmd_make_data(args) -> int:
    from . import data as data_mod
    from .datasets import make_synthetic

    n_test = args.n_test if args.test_out else 0
    t0 = time.perf_counter()
    syn = make_synthetic(
        args.n,
        n_test,
        m=args.m,
        p_in=args.d,
        nonlinear=not args.linear,
        noise=args.noise,
        random_state=args.seed,
    )
    Y, idx = _corrupt(syn.Y_train, args.outliers, args.seed)
    ds = data_mod.write(args.out, syn.X_train, Y, syn.theta, chunks=args.chunks, overwrite=args.overwrite)
    _say(
        args,
        f"wrote {ds.n} curves ({'linear' if args.linear else 'nonlinear'} generator, noise {args.noise:g}, "
        f"{outlier_label(args.outliers)}: {len(idx)} corrupted) to {args.out}",
        f"  x: ({ds.n}, {ds.d}), y: ({ds.n}, {ds.m}), {ds.n_chunks} chunk(s) of {ds.chunk_rows} rows, "
        f"{_human_bytes(_path_size(args.out))} [{time.perf_counter() - t0:.1f} s]",
    )
    if args.test_out:
        test = data_mod.write(
            args.test_out, syn.X_test, syn.Y_test, syn.theta, chunks=args.chunks, overwrite=args.overwrite
        )
        _say(args, f"wrote {test.n} clean test curves to {args.test_out}")
    return EXIT_OK


# -------------------------------------------------------------------------------------------------------------
# fit
# -------------------------------------------------------------------------------------------------------------


def _rf_options_given(args) -> dict:
    """The random-feature options given on the command line (:func:`rffor.settings.cli_options`), by name."""
    from .settings import cli_options

    return {o["name"]: getattr(args, o["name"]) for o in cli_options() if getattr(args, o["name"]) is not None}


def _estimator_from_args(args, loss, solver: str):
    from .estimator import FunctionalRegressor
    from .quantile import QuantileFunctionRegressor

    quantile = loss.needs_levels
    params = dict(
        kernel_x=args.kernel_x,
        kernel_theta=args.kernel_theta,
        solver=solver,
        random_state=args.seed,
        verbose=args.verbose,
    )
    if args.lam is not None:  # otherwise each estimator's own default
        params["lam"] = args.lam
    if quantile:
        params.update({k: v for k, v in (("levels", args.levels), ("noncrossing", args.noncrossing)) if v is not None})
    if args.tol is not None:
        params["tol"] = args.tol
    if args.max_iter is not None:
        params["max_iter"] = args.max_iter
    if solver == "rff":
        options = _rf_options_given(args)
        if quantile and "init_reweight" in options:
            raise UsageError("--reweight is for the Huber losses, not --loss pinball")
        params.update(options)
        if args.features_theta not in (None, "exact"):
            params["output_features"] = "rff"
            params["n_features_theta"] = args.features_theta
        if args.scheduler:
            params["scheduler_address"] = args.scheduler
        if args.checkpoint:
            params["checkpoint"] = args.checkpoint
            params["resume"] = args.resume
    return (QuantileFunctionRegressor if quantile else FunctionalRegressor)(loss, **params)


def _resolve_cli_solver(args, n: int, loss) -> str:
    from .settings import AUTO_EXACT_MAX_N, RFSettings, cli_options

    flags = {o["name"]: o["flag"] for o in cli_options()}
    given_rf = _rf_options_given(args)
    rff_only = {
        "--scheduler": args.scheduler,
        "--checkpoint": args.checkpoint,
        "--resume": args.resume,
        "--features-theta": args.features_theta is not None,
        "--lam auto": args.lam == "auto",
        **{flags[name]: True for name in given_rf},
    }
    if args.loss == "pinball":
        auto = [opt for opt in ("--lam auto", "--loss-params", "--kernel-theta-params") if rff_only.get(opt)]
        if auto:
            raise UsageError(
                f"{', '.join(auto)}: the held-out selection is for curves, not --loss pinball; give --lam (in Python, "
                "rffor.model_selection.QuantileFunctionRegressorCV chooses λ of a quantile function by K-fold CV)"
            )
    given = [opt for opt, value in rff_only.items() if value]
    solver = args.solver
    has_dual = loss.has_dual
    if solver == "auto":
        solver = "rff" if n > AUTO_EXACT_MAX_N or given or not has_dual else "admm"
    if solver != "rff" and not has_dual:
        raise UsageError(f"--loss {args.loss} is not convex (no dual): it needs --solver rff, not {args.solver}")
    if solver != "rff" and given:
        raise UsageError(f"{', '.join(given)} only apply to --solver rff (got --solver {args.solver})")
    if args.resume and not args.checkpoint:
        raise UsageError("--resume needs --checkpoint PATH")
    for name in ("loss_params", "kernel_theta_params"):
        if name in given_rf and args.lam != "auto":
            raise UsageError(
                f"{flags[name]} {given_rf[name]} needs --lam auto (both are chosen on the same held-out curves)"
            )
    if solver == "rff":  # the settings' own checks, before any work: the same messages as the library's
        try:
            lam = {} if args.lam is None else {"lam": args.lam}
            settings = RFSettings(**given_rf, **lam)
            settings.check_model(loss, args.kernel_theta)
            settings.resolved(loss)
        except (TypeError, ValueError) as exc:
            raise UsageError(str(exc)) from None
    return solver


def cmd_fit(args) -> int:
    loss = _loss_from_args(args)
    ds = _open_dataset(args.data)
    solver = _resolve_cli_solver(args, ds.n, loss)
    est = _estimator_from_args(args, loss, solver)
    quantile = loss.needs_levels
    if quantile and ds.m != 1:
        raise UsageError(
            f"--loss {args.loss} learns the quantile function of a scalar target, but {args.data} holds curves of "
            f"m = {ds.m} locations (its y must have shape (n, 1))"
        )
    what = f"{ds.n} targets (quantile function)" if quantile else f"{ds.n} curves x {ds.m} locations"
    _say(args, f"fitting {describe_loss(loss)} on {what} from {args.data} (solver {solver})")
    t0 = time.perf_counter()
    if quantile and solver != "rff":
        X, Y = ds.read()
        est.fit(np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)[:, 0])
    elif solver == "rff":
        from .executor import SchedulerLostError

        try:
            est.fit(ds)
        except SchedulerLostError as exc:
            if not args.checkpoint:
                raise
            command = shlex.join(["rffor", *[a for a in args.argv if a != "--resume"], "--resume"])
            raise SchedulerLostError(f"{exc}. To resume: {command}") from exc
    else:
        X, Y = ds.read()
        est.fit(np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64), theta=ds.theta)
    elapsed = time.perf_counter() - t0
    path = est.save(args.out)
    unit = "iterations" if solver != "rff" else ("passes" if est.rff_method_ in ("mm", "closed_form") else "steps")
    details = [f"{est.n_iter_} {unit}"]
    if args.lam == "auto":
        chosen = f"λ = {est.lam_:.3g}, {describe_loss(est.loss_)}"
        if getattr(args, "kernel_theta_params", None):
            chosen += f", k_Θ = {est.kernel_theta_!r}"
        details.append(f"{chosen} chosen on held-out curves")
    if getattr(est, "duality_gap_", None) is not None and solver != "rff":
        details.append(f"relative duality gap {est.duality_gap_:.1e}")
    _say(
        args,
        f"fitted in {elapsed:.1f} s ({', '.join(details)}); saved the model to {path} "
        f"({_human_bytes(_path_size(path))})",
    )
    return EXIT_OK


# -------------------------------------------------------------------------------------------------------------
# predict / evaluate / info
# -------------------------------------------------------------------------------------------------------------


def _load_model(path: str):
    from .estimator import load

    return load(path)


def _check_dims(est, ds, model_path: str, data_path: str) -> None:
    if ds.d != est.n_features_in_:
        raise ValueError(
            f"{data_path} has inputs of dimension {ds.d}, but the model {model_path} was fitted on dimension "
            f"{est.n_features_in_}"
        )


def cmd_predict(args) -> int:
    import dask.array as da

    from . import data as data_mod

    est = _load_model(args.model)
    ds = _open_dataset(args.data)
    _check_dims(est, ds, args.model, args.data)
    if _is_quantile(est):  # the quantiles at the training levels, a curve over the levels per input
        grid = est.levels_

        def block_predict(block):
            return est.predict(np.asarray(block, dtype=np.float64), levels=grid)
    else:
        theta = _prediction_grid(est, ds.theta)
        grid = ds.theta

        def block_predict(block):
            return _predict_block(est, block, theta)

    x, _ = ds.to_dask()
    y_hat = da.map_blocks(
        lambda block: block_predict(block).astype(np.float32, copy=False),
        x,
        chunks=(x.chunks[0], (grid.shape[0],)),
        dtype=np.float32,
        meta=np.empty((0, 0), dtype=np.float32),
    )
    t0 = time.perf_counter()
    if args.verbose:
        from dask.diagnostics import ProgressBar

        with ProgressBar():
            data_mod.write(args.out, x, y_hat, grid, chunks=ds.chunk_rows, overwrite=args.overwrite)
    else:
        data_mod.write(args.out, x, y_hat, grid, chunks=ds.chunk_rows, overwrite=args.overwrite)
    _say(
        args,
        f"wrote predictions for {ds.n} inputs on {grid.shape[0]} locations to {args.out} "
        f"({ds.n_chunks} chunk(s), {time.perf_counter() - t0:.1f} s)",
    )
    return EXIT_OK


def cmd_evaluate(args) -> int:
    est = _load_model(args.model)
    ds = _open_dataset(args.data)
    _check_dims(est, ds, args.model, args.data)
    scores = evaluate_model(est, ds)
    if args.json:
        print(json.dumps(scores))
        return EXIT_OK
    if _is_quantile(est):
        levels = ", ".join(f"{t:g}" for t in scores["levels"])
        print(f"{args.model} on {args.data} ({scores['n']} targets), quantiles at τ = {levels}:")
        print(
            _format_table(
                ["metric", "value"],
                [
                    ["pinball (sum over the 5 levels)", f"{scores['pinball']:.6g}"],
                    ["integral pinball (training levels)", f"{scores['integral_pinball']:.6g}"],
                    ["crossing (model, 5 levels)", f"{scores['crossing']:.3g}"],
                    ["crossing (model, training levels)", f"{scores['crossing_training_levels']:.3g}"],
                    ["calibration max |coverage - τ|", f"{scores['calibration_error']:.4f}"],
                ],
            )
        )
        return EXIT_OK
    print(f"{args.model} on {args.data} ({scores['n']} curves, {scores['observed']} observed values):")
    print(
        _format_table(
            ["metric", "value"],
            [
                ["MSE", f"{scores['mse']:.6g}"],
                ["NMSE", f"{scores['nmse']:.6g}"],
                ["R2", f"{scores['r2']:.4f}"],
            ],
        )
    )
    return EXIT_OK


def _model_info(path: str) -> dict:
    from .io import read_metadata

    meta = read_metadata(path)
    fitted = meta["fitted"]
    arrays = meta["arrays"]
    info = {
        "kind": "model",
        "path": path,
        "format": f"{meta['format']} v{meta['format_version']}",
        "rffor_version": meta.get("rffor_version"),
        "solver": fitted.get("solver"),
        "loss": fitted.get("loss"),
        "kernel_x": fitted.get("kernel_x"),
        "kernel_theta": fitted.get("kernel_theta"),
        # the λ of the model: the chosen one for lam="auto" (random features record it in their state)
        "lam": (fitted.get("solver_state") or {}).get("lam", meta["params"].get("lam")),
        "n_features_in": fitted.get("n_features_in"),
        "n_iter": fitted.get("n_iter"),
        "duality_gap": fitted.get("duality_gap"),
        "arrays": {name: a.get("shape") for name, a in arrays.items()},
        "size_bytes": _path_size(path),
    }
    if "theta" in arrays:
        info["m"] = arrays["theta"]["shape"][0]
    if "x_fit" in arrays:
        info["n_train"] = arrays["x_fit"]["shape"][0]
    if fitted.get("solver_state"):
        info["solver_state"] = {k: v for k, v in fitted["solver_state"].items() if not isinstance(v, (list, dict))}
    return info


def _data_info(path: str) -> dict:
    ds = _open_dataset(path)
    theta = ds.theta
    return {
        "kind": "dataset",
        "path": path,
        "n": ds.n,
        "d": ds.d,
        "m": ds.m,
        "chunk_rows": ds.chunk_rows,
        "n_chunks": ds.n_chunks,
        "dtype": str(ds.dtype),
        "theta_range": [float(theta[0]), float(theta[-1])],
        "size_bytes": _path_size(path) if os.path.exists(path) else None,
    }


def _looks_like_zarr(path: str) -> bool:
    return "://" in path or (os.path.isdir(path) and os.path.exists(os.path.join(path, "zarr.json")))


def cmd_info(args) -> int:
    from .io import is_model

    path = args.path
    if "://" not in path and not os.path.exists(path):
        raise FileNotFoundError(f"nothing at {path!r}")
    if _looks_like_zarr(path):
        info = _data_info(path)
    elif is_model(path):
        info = _model_info(path)
    else:
        from .io import read_metadata

        read_metadata(path)  # raises the precise reason (another format, version, corruption)
        raise ValueError(f"{path!r} is neither an rffor model nor an rffor dataset")  # pragma: no cover
    if args.json:
        print(json.dumps(info))
        return EXIT_OK
    if info["kind"] == "dataset":
        print(f"rffor dataset {path}")
        print(
            f"  curves n = {info['n']}, input dimension d = {info['d']}, grid m = {info['m']} "
            f"on [{info['theta_range'][0]:g}, {info['theta_range'][1]:g}]"
        )
        print(
            f"  {info['n_chunks']} chunk(s) of {info['chunk_rows']} rows, {info['dtype']}"
            + (f", {_human_bytes(info['size_bytes'])}" if info["size_bytes"] is not None else "")
        )
        return EXIT_OK
    from .kernels import kernel_from_spec
    from .losses import loss_from_spec

    print(f"rffor model {path} ({info['format']}, written by rffor {info['rffor_version']})")
    print(f"  solver {info['solver']}, loss {describe_loss(loss_from_spec(info['loss']))}, λ = {info['lam']:g}")
    print(f"  kernels: k_X = {kernel_from_spec(info['kernel_x'])!r}, k_Θ = {kernel_from_spec(info['kernel_theta'])!r}")
    line = f"  input dimension {info['n_features_in']}"
    if "n_train" in info:
        line += f", {info['n_train']} training curves"
    if "m" in info:
        line += f", grid of {info['m']} locations"
    print(line)
    fit = f"  {info['n_iter']} {'steps' if info['solver'] == 'rff' else 'iterations'}"
    if info["duality_gap"] is not None and info["solver"] != "rff":
        fit += f", relative duality gap {info['duality_gap']:.1e}"
    print(fit)
    print(
        "  arrays: "
        + ", ".join(f"{k} {tuple(v)}" for k, v in info["arrays"].items())
        + f"; {_human_bytes(info['size_bytes'])}"
    )
    return EXIT_OK


# -------------------------------------------------------------------------------------------------------------
# demo
# -------------------------------------------------------------------------------------------------------------


def _demo_settings(args) -> dict:
    quick = args.quick
    if args.exact:
        cfg = {"n": 150 if quick else 1000, "n_test": 40 if quick else 300, "m": 20 if quick else 50}
    else:
        cfg = dict(DEMO_DEFAULTS["quick" if quick else "full"])
    if args.n is not None:
        cfg["n"] = args.n
    if args.exact and args.scheduler:
        raise UsageError("--exact trains in this process; --scheduler is for the random-feature solver")
    from .settings import AUTO_EXACT_MAX_N

    if args.exact and cfg["n"] > AUTO_EXACT_MAX_N:
        raise UsageError(f"--exact holds an n x n Gram matrix: use --n <= {AUTO_EXACT_MAX_N} (got {cfg['n']})")
    cfg.update(lam=1e-7, kappa=args.kappa, n_features_x=200 if quick else 1000)
    return cfg


def cmd_demo(args) -> int:
    import contextlib

    from . import data as data_mod
    from .datasets import make_synthetic
    from .estimator import FunctionalRegressor
    from .kernels import Gaussian
    from .losses import Huber, Square
    from .metrics import mse

    cfg = _demo_settings(args)
    n, n_test, m = cfg["n"], cfg["n_test"], cfg["m"]
    use_rff = not args.exact
    seed, out = args.seed, args.out
    os.makedirs(out, exist_ok=True)
    t_start = time.perf_counter()
    step, n_steps = 0, 6

    def stage(text: str) -> None:
        nonlocal step
        step += 1
        _say(args, f"[{step}/{n_steps}] {text}")

    common = dict(kernel_x=Gaussian(gamma=0.01), kernel_theta=Gaussian(gamma=100.0), random_state=seed)
    if use_rff:
        # λ and the output kernel's γ chosen on held-out curves; Nyström features: the accurate choice on curve data
        common.update(solver="rff", lam="auto", kernel_theta_params="auto", input_features="nystrom",
                      n_features_x=cfg["n_features_x"])  # fmt: skip
    else:
        common.update(solver="admm", lam=cfg["lam"])
    losses = {"square": Square(), "huber2": Huber(kappa=cfg["kappa"], p=2)}

    # 1. data ------------------------------------------------------------------------------------------------
    stage(f"generating {n} training curves (nonlinear GP generator, {m} points, noise 0.1) with "
          f"{outlier_label(args.outliers)}")  # fmt: skip
    syn = make_synthetic(n, n_test, m=m, nonlinear=True, noise=0.1, random_state=seed)
    Y_train, idx = _corrupt(syn.Y_train, args.outliers, seed)
    tmp_root = tempfile.mkdtemp(prefix="rffor-demo-")
    fitted, timings = {}, {}
    try:
        store = os.path.join(out, "train.zarr") if args.keep_data else os.path.join(tmp_root, "train.zarr")
        ds = data_mod.write(store, syn.X_train, Y_train, syn.theta, chunks=max(1, -(-n // 16)), overwrite=True)
        _say(args, f"      wrote the Zarr store {store}: {ds.n_chunks} chunks of {ds.chunk_rows} curves, "
                   f"{_human_bytes(_path_size(store))}; {len(idx)} training curves are outliers")  # fmt: skip

        # 2. where to train ------------------------------------------------------------------------------------
        if use_rff:
            from .executor.dask import connect

            where = f"the Dask scheduler at {args.scheduler}" if args.scheduler else "an embedded Dask LocalCluster"
            stage(f"starting {where}" if not args.scheduler else f"connecting to {where}")
            connection = connect(scheduler_address=args.scheduler)
        else:
            stage("exact solver: training in this process (no Dask)")
            connection = contextlib.nullcontext(None)
        with connection as conn:
            if conn is not None:
                _say(args, f"      {conn.description}: {len(conn.client.scheduler_info().get('workers', {}))} "
                           "worker(s)")  # fmt: skip
            # 3-4. training: out of core from the Zarr store ----------------------------------------------------
            for label, loss in losses.items():
                if not use_rff:
                    how = f"the exact ADMM solver (λ = {cfg['lam']:g})"
                elif loss.is_square:
                    how = (
                        f"Nyström features (M = {cfg['n_features_x']}): λ and the output kernel's γ chosen on 1 curve "
                        "in 10 held out, closed forms from one map-reduce of feature sums over the chunks on the "
                        "workers"
                    )
                else:
                    how = (
                        f"Nyström features (M = {cfg['n_features_x']}): λ, κ (from {cfg['kappa']:g}) and the output "
                        "kernel's γ chosen on 1 curve in 10 held out, every candidate and the final model fitted by "
                        "majorize-minimize passes, each pass's gradient map-reduced on the workers"
                    )
                stage(f"training the {label} model with {how}")
                extra = {"client": conn.client} if conn is not None else {}
                if use_rff and not loss.is_square:
                    extra["loss_params"] = "auto"
                est = FunctionalRegressor(loss, verbose=0 if args.quiet else 1, **common, **extra)
                t0 = time.perf_counter()
                if use_rff:
                    est.fit(ds)
                else:
                    X, Y = ds.read()
                    est.fit(np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64), theta=ds.theta)
                timings[label] = time.perf_counter() - t0
                fitted[label] = est
                _say(args, f"      done in {timings[label]:.1f} s")
            # 5. a reference: the square loss on the same curves without outliers (in memory) ------------------
            stage(f"evaluating on {n_test} clean test curves; reference: the square loss trained on the training "
                  "curves without outliers")  # fmt: skip
            reference = "square, no outliers"
            t0 = time.perf_counter()
            extra = {"client": conn.client} if conn is not None else {}
            fitted_ref = FunctionalRegressor(Square(), **common, **extra).fit(syn.X_train, syn.Y_train, theta=syn.theta)
            timings[reference] = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    preds = {label: np.asarray(est.predict(syn.X_test), dtype=np.float64) for label, est in fitted.items()}
    rows = []
    for label, est in [*fitted.items(), (reference, fitted_ref)]:
        P = preds.get(label, np.asarray(est.predict(syn.X_test), dtype=np.float64))
        err = mse(syn.Y_test, P)
        kappa = getattr(est.loss_, "kappa", None)
        rows.append([label, "—" if kappa is None else f"{kappa:.3g}", f"{err:.4f}", f"{err / m:.5f}",
                     f"{est.score(syn.X_test, syn.Y_test):.3f}", *_demo_fit_columns(est),
                     f"{timings[label]:.1f}"])  # fmt: skip
    print()
    print(f"Test error on clean curves: {n} training curves with {outlier_label(args.outliers)}, "
          f"{'random-feature' if use_rff else 'exact ADMM'} solver")  # fmt: skip
    print(_format_table(["model", "κ", "test MSE", "NMSE", "R2", "λ", "γ_Θ", "passes", "objective start → end",
                         "fit (s)"], rows))  # fmt: skip
    print()
    for label, est in fitted.items():
        path = est.save(os.path.join(out, label.split(" ")[0] + ".rffor"))
        _say(args, f"      saved {path}")

    # 6. plots ------------------------------------------------------------------------------------------------
    stage(f"writing plots to {out}")
    try:
        written = _demo_plots(out, syn, Y_train, idx, preds, fitted, args)
    except ImportError as exc:
        _say(args, f"      plots skipped: {exc}")
        written = []
    for path in written:
        _say(args, f"      {path}")
    _say(args, f"demo finished in {time.perf_counter() - t_start:.0f} s; outputs are in {os.path.abspath(out)}")
    return EXIT_OK


def _demo_fit_columns(est) -> list[str]:
    """λ, γ of k_Θ, passes over the data and the objective J of (P_rf) at the start and end of the final fit (the
    random-feature solver; the selection's passes, on 90% of the curves, come first)."""
    lam = getattr(est, "lam_", est.lam)
    gamma = f"{est.kernel_theta_.gamma:.3g}"
    history = getattr(est, "rff_history_", None)
    if not history:
        return [f"{lam:.0e}", gamma, f"{est.n_iter_} iterations", "—"]
    path = getattr(est, "lam_path_", None) or {}
    if est.rff_method_ == "closed_form":
        passes = "1 (sums)"
    else:  # the selection's MM passes on 90% of the curves, then the refit's on all of them
        passes = f"{path.get('passes', 0)} + {est.n_iter_}" if path else f"{est.n_iter_}"
    return [f"{lam:.0e}", gamma, passes, f"{history[0]['objective']:.4g} → {history[-1]['objective']:.4g}"]


def _demo_plots(out: str, syn, Y_train, idx, preds, fitted, args) -> list[str]:
    from .plot import plot_curves, plot_history

    written = []
    # training data: a few corrupted and clean curves
    corrupted = set(idx.tolist())
    shown = [int(i) for i in idx[:2]] + [i for i in range(len(Y_train)) if i not in corrupted][: 4 - min(2, len(idx))]
    fig = plot_curves(
        syn.theta,
        syn.Y_train,
        {"observed (training data)": Y_train},
        indices=shown,
        true_label="before corruption",
        panel_titles=[f"training curve {i}" + (" (outlier)" if i in corrupted else "") for i in shown],
        title=f"Training curves before corruption and as observed ({outlier_label(args.outliers)})",
    )
    path = os.path.join(out, "data.png")
    fig.savefig(path, dpi=100)
    written.append(path)

    fig = plot_curves(syn.theta, syn.Y_test, preds, n_curves=4, title="Test inputs: true and predicted curves")
    path = os.path.join(out, "curves.png")
    fig.savefig(path, dpi=100)
    written.append(path)

    # objectives of different losses are not comparable: plot the iterative fits only (the square loss is a
    # closed form, one record)
    histories = {label: est.objective_history_ for label, est in fitted.items() if len(est.objective_history_) > 1}
    solver = next(iter(fitted.values())).solver_
    closed = [label for label in fitted if label not in histories]
    fig = plot_history(
        histories or {label: est.objective_history_ for label, est in fitted.items()},
        xlabel="round (local SGD on every partition, then averaging)" if solver == "rff" else "ADMM iteration",
        ylabel="training objective",
        title="Training history" + (f" ({', '.join(closed)}: closed form)" if histories and closed else ""),
        log=False,
    )
    path = os.path.join(out, "training.png")
    fig.savefig(path, dpi=100)
    written.append(path)
    return written


# -------------------------------------------------------------------------------------------------------------
# parser
# -------------------------------------------------------------------------------------------------------------


class _Formatter(argparse.HelpFormatter):
    """Shows an option's default when it has a meaningful one and the help text does not already give it."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (
            "default" not in text
            and not any(default is v for v in (None, False, argparse.SUPPRESS))
            and action.option_strings
            and not isinstance(default, dict)
            and action.nargs != 0
        ):
            text += " (default: %(default)s)"
        return text


def _common(debug_default) -> argparse.ArgumentParser:
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--debug", action="store_true", default=debug_default, help="show the full traceback on errors")
    return parent


def build_parser() -> argparse.ArgumentParser:
    from . import __version__
    from .losses import LOSS_ALIASES
    from .settings import AUTO_EXACT_MAX_N, cli_options
    from .solvers import EXACT_SOLVERS, solver_default

    DEFAULTS = _defaults()

    parser = argparse.ArgumentParser(
        prog="rffor",
        description="Function-valued regression (x -> whole curve) in vector-valued RKHSs: robust losses, exact "
        "solvers and random features trained out of core on Dask.",
        epilog="Run 'rffor COMMAND --help' for the options of a command. Start with 'rffor demo'.",
        parents=[_common(False)],
    )
    parser.add_argument("--version", action="version", version=f"rffor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = _common(argparse.SUPPRESS)

    # demo
    p = sub.add_parser(
        "demo",
        parents=[common],
        formatter_class=_Formatter,
        help="train a square-loss and a Huber model on synthetic curves with outliers, show the results",
        description="The whole idea on this machine: write a synthetic dataset with outliers (nonlinear generator, "
        "Gaussian-process mixtures of Lambert et al., ICML 2022) "
        "to a temporary Zarr store, train a square-loss and a Huber model with the random-feature "
        "solver, evaluate both on clean test curves, print a table and write PNG plots.",
    )
    p.add_argument(
        "--n",
        type=_int_at_least(10),
        default=None,
        help=f"training curves (default {DEMO_DEFAULTS['full']['n']}; --quick {DEMO_DEFAULTS['quick']['n']}; "
        "--exact 1000)",
    )
    p.add_argument(
        "--outliers",
        type=parse_outliers,
        default="2:0.2",
        metavar="TYPE:TAU[:PARAM]",
        help="training outliers: type 1, 2 or 3, fraction TAU, PARAM = ζ (type 2) or ξ (type 3); 'none'",
    )
    p.add_argument("--out", default="rffor-demo-out", help="directory for the plots and the two saved models")
    p.add_argument("--kappa", type=_float_in(0, low_open=True), default=0.15,
                   help="Huber threshold κ (output units): where the random-feature solver's selection starts, "
                        "the value of --exact")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="a small, fast run (for tests)")
    p.add_argument(
        "--exact",
        action="store_true",
        help="use the exact ADMM solver in memory instead of random features on Dask (default n 1000)",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="train on this Dask scheduler instead of an embedded LocalCluster (its workers must see "
        "the temporary store: same machine or shared file system)",
    )
    p.add_argument("--keep-data", action="store_true", help="keep the Zarr training store in --out")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed")
    p.add_argument("-q", "--quiet", action="store_true", help="print only the results table")
    p.set_defaults(func=cmd_demo)

    # make-data
    p = sub.add_parser(
        "make-data",
        parents=[common],
        formatter_class=_Formatter,
        help="write a synthetic dataset (Zarr) with optional outliers",
        description="Write synthetic function-to-function data (Gaussian-process mixtures, linear or nonlinear) "
        "to a Zarr store; optionally a clean "
        "test set with the same generator.",
    )
    p.add_argument("out", metavar="OUT", help="destination Zarr store (e.g. train.zarr)")
    p.add_argument("--n", type=_int_at_least(1), default=1000, help="training curves")
    p.add_argument("--m", type=_int_at_least(1), default=100, help="grid locations per output curve")
    p.add_argument("--d", type=_int_at_least(4), default=100, help="grid locations per input curve")
    p.add_argument("--noise", type=_float_in(0), default=0.0, help="standard deviation of the output noise")
    p.add_argument(
        "--outliers",
        type=parse_outliers,
        default=None,
        metavar="TYPE:TAU[:PARAM]",
        help="training outliers: type 1, 2 or 3, fraction TAU, PARAM = ζ (type 2) or ξ (type 3)",
    )
    p.add_argument("--linear", action="store_true", help="the paper's linear generator instead of the nonlinear one")
    p.add_argument("--chunks", type=_int_at_least(1), default=None, help="rows per chunk (default ~8 MB of y)")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed")
    p.add_argument("--test-out", default=None, metavar="PATH", help="also write clean test curves here")
    p.add_argument("--n-test", type=_int_at_least(1), default=200, help="test curves (with --test-out)")
    p.add_argument("--overwrite", action="store_true", help="replace existing stores")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=cmd_make_data)

    # fit
    p = sub.add_parser(
        "fit",
        parents=[common],
        formatter_class=_Formatter,
        help="fit a model on a Zarr dataset and save it",
        description="Fit a FunctionalRegressor (a QuantileFunctionRegressor with --loss pinball) on a Zarr dataset "
        "and save it (rffor.io format). Exact solvers read "
        "the data into memory; --solver rff trains out of core, chunk by chunk (on a Dask cluster with --scheduler).",
    )
    p.add_argument("data", metavar="DATA", help="training data (Zarr store written by make-data or rffor.data.write)")
    p.add_argument(
        "--loss",
        choices=list(LOSS_ALIASES),
        default="square",
        help="loss: square; huber1 (robust to outlying points) or huber2 (to outlying curves), with --kappa; "
        "pinball: the quantile function of a scalar target (y of shape (n, 1)), with optional --epsilon, --kappa, "
        "--levels, --noncrossing; eps2 "
        "or epsinf (sparse), with --epsilon",
    )
    p.add_argument(
        "--kappa", type=_float_in(0), default=None, help="Huber threshold κ (huber1/2); pinball: smoothing κ ≥ 0"
    )
    p.add_argument("--epsilon", type=_float_in(0), default=None, help="ε-insensitive width (eps2/epsinf/pinball)")
    p.add_argument(
        "--lam",
        type=_lam,
        default=None,
        help=f"regularisation λ (default {DEFAULTS['lam']:g}; {_quantile_defaults()['lam']:g} for pinball), or auto: "
        "chosen on 1 curve in 10 held out (--solver rff, not pinball; rffor.solvers.selection)",
    )
    p.add_argument(
        "--levels",
        type=_int_at_least(1),
        default=None,
        metavar="M",
        help=f"pinball: training grid of M levels (default {_quantile_defaults()['levels']})",
    )
    p.add_argument(
        "--noncrossing",
        type=_float_in(0),
        default=None,
        metavar="LAMBDA_NC",
        help="pinball: weight of the non-crossing penalty (default 0: none). Exact solvers: ~10 makes it exact at "
        "the training levels. rff: a subgradient term of the steps at their levels; 1 made the constant steps "
        "unstable on a wiggly model where 0.1 was not (tests/test_quantile_rff.py)",
    )
    p.add_argument(
        "--solver",
        choices=["auto", *EXACT_SOLVERS, "rff"],
        default="auto",
        help=f"auto: admm up to {AUTO_EXACT_MAX_N} curves, rff above",
    )
    p.add_argument(
        "--kernel-x",
        type=_kernel,
        default=None,
        metavar="NAME:GAMMA",
        help="input kernel, e.g. gaussian:0.01 (default: Gaussian, median heuristic on up to 1000 rows)",
    )
    p.add_argument(
        "--kernel-theta",
        type=_kernel,
        default=None,
        metavar="NAME:GAMMA",
        help="output kernel, e.g. gaussian:100 (default gaussian:100/span², pinball gaussian:10)",
    )
    p.add_argument(
        "--features-theta",
        type=_features_theta,
        default=None,
        metavar="D|exact",
        help="rff: 'exact' output factor (default) or D random output features",
    )
    p.add_argument(
        "--tol", type=_float_in(0), default=None, help="exact solvers: relative duality gap to reach (default 1e-6)"
    )
    p.add_argument(
        "--max-iter",
        type=_int_at_least(1),
        default=None,
        help="exact solvers: iteration cap (default "
        + ", ".join(f"{solver_default(name, 'max_iter')} for {name}" for name in EXACT_SOLVERS)
        + ")",
    )
    for opt in cli_options():  # the random-feature options: flags, types, choices and help from the settings
        p.add_argument(
            opt["flag"], dest=opt["name"], type=_argparse_type(opt["type"], opt["flag"]), choices=opt["choices"],
            default=None, metavar=opt["metavar"], help="rff: " + opt["help"],
        )  # fmt: skip
    p.add_argument("--scheduler", default=None, metavar="ADDRESS", help="rff: Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--checkpoint", default=None, metavar="PATH", help="rff: checkpoint file written every round")
    p.add_argument("--resume", action="store_true", help="rff: continue from --checkpoint")
    p.add_argument("--seed", type=_int_at_least(0), default=0, help="random seed (random features, DSGD)")
    p.add_argument("--out", default="model.rffor", metavar="MODEL", help="where to save the model")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show solver progress")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=cmd_fit)

    # predict
    p = sub.add_parser(
        "predict",
        parents=[common],
        formatter_class=_Formatter,
        help="predict curves for the inputs of a dataset (chunk by chunk) into a Zarr store",
        description="Predict the curves of every input of DATA, chunk by chunk (out of core), on DATA's grid. "
        "The result is an rffor dataset: x = the inputs, y = the predicted curves.",
    )
    p.add_argument("model", metavar="MODEL", help="saved model")
    p.add_argument("data", metavar="DATA", help="Zarr dataset whose inputs to predict (its y is not read)")
    p.add_argument("--out", required=True, metavar="PRED.zarr", help="destination Zarr store")
    p.add_argument("--overwrite", action="store_true", help="replace an existing store")
    p.add_argument("-v", "--verbose", action="count", default=0, help="show a progress bar")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=cmd_predict)

    # evaluate
    p = sub.add_parser(
        "evaluate",
        parents=[common],
        formatter_class=_Formatter,
        help="MSE, NMSE and R² of a model on a dataset",
        description="Score a model on a dataset, chunk by chunk, over the observed entries: MSE = mean over curves "
        "of the sum over the grid of squared errors, NMSE = MSE / m, R² as FunctionalRegressor.score.",
    )
    p.add_argument("model", metavar="MODEL", help="saved model")
    p.add_argument("data", metavar="DATA", help="Zarr dataset with the true curves")
    p.add_argument("--json", action="store_true", help="print the scores as JSON")
    p.set_defaults(func=cmd_evaluate)

    # info
    p = sub.add_parser(
        "info",
        parents=[common],
        formatter_class=_Formatter,
        help="describe a saved model or a dataset",
        description="Describe a saved model (format, solver, loss, kernels, sizes) or a Zarr dataset (n, d, m, "
        "chunks). Reading a model's description loads no arrays.",
    )
    p.add_argument("path", metavar="MODEL|DATA", help="a saved model or a Zarr dataset")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.set_defaults(func=cmd_info)
    return parser


def _defaults() -> dict:
    """The estimator's defaults (one home: :class:`rffor.FunctionalRegressor`'s signature)."""
    from .estimator import FunctionalRegressor

    return FunctionalRegressor().get_params(deep=False)


def _quantile_defaults() -> dict:
    """The quantile estimator's defaults (:class:`rffor.QuantileFunctionRegressor`'s signature)."""
    from .quantile import QuantileFunctionRegressor

    return QuantileFunctionRegressor().get_params(deep=False)


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    if isinstance(exc, FileNotFoundError) and exc.filename and not text.startswith("no "):
        text = f"no such file or directory: {exc.filename!r}"
    return text or type(exc).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``rffor`` console script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)  # exits with status 2 on a usage error
    args.argv = list(sys.argv[1:] if argv is None else argv)
    command = args.command
    try:
        return int(args.func(args) or EXIT_OK)
    except UsageError as exc:
        if args.debug:
            raise
        print(f"rffor {command}: usage error: {_one_line(exc)} (see 'rffor {command} --help')", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"rffor {command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # noqa: BLE001 - the command line reports every failure as one line
        if args.debug:
            raise
        print(f"rffor {command}: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
