"""Robustness to functional outliers (paper 000, §5.1 and Figure 2): square loss against H_κ^1 and H_κ^2.

For every draw of the synthetic data (MATH.md §7; the paper's linear variant and the nonlinear one), every outlier
type (1 and 2 global, 3 local) and every proportion τ of corrupted training curves, each loss has its λ (and κ)
selected by K-fold cross-validation on the training set, the same rule for every loss: with outliers the median of
the fold scores, each fold scored by the median over its validation curves of the per-curve MSE (paper 000 §5.1:
"for corrupted data in the hyperparameter choice using cross-validation the mean was replaced with median"; the
validation curves are corrupted too, and a fold's mean error is dominated by its outliers); without outliers the
usual mean rule. Every loss starts from the same grids, and a selection at an edge widens its grid
(``cv_select_widening`` in benchmarks/_common.py). The model refitted on the whole training set is scored on the
clean test set (NMSE, MATH.md §7). A τ = 0 row gives the clean reference. Draws are paired: every setting of one
draw corrupts the same clean data.

The random-feature solver (solver="rff", fit_rff's defaults: the square loss in closed form, the Huber losses by MM
passes) is run side by side with the hyperparameters selected for the exact solver (its own cross-validation would
multiply the cost by the grid size); its columns show what the approximation costs in accuracy at the same (λ, κ).

Writes the ``robustness`` block of benchmarks/README.md, benchmarks/figures/robustness.png and
benchmarks/results/robustness.json.

Usage::

    python benchmarks/robustness.py --oracle --jobs 2    # full run: 10 draws x 2 variants x 10 settings, both
                                                         # solvers (see the README block for its time)
    python benchmarks/robustness.py --rff-only           # redo the rff columns with a saved run's (λ, κ)
    python benchmarks/robustness.py --quick              # 2 draws, small grids, about a minute
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    LAM_FLOOR,
    RESULTS,
    Axis,
    add_common_args,
    cv_select_widening,
    edge_counts,
    figure_path,
    fmt,
    format_grid,
    limit_blas_threads,
    machine_info,
    markdown_table,
    mean_std,
    nmse,
    provenance,
    save_json,
    widening_text,
    write_section,
)

from rffor import FunctionalRegressor  # noqa: E402
from rffor.datasets import add_outliers, make_synthetic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber, Square  # noqa: E402

#: kernels of the paper's synthetic experiments (appendix B.2.2): ρ_in = 0.01, ρ_out = 100
GAMMA_X, GAMMA_THETA = 0.01, 100.0
LOSSES = ("square", "huber1", "huber2")
LOSS_LABEL = {"square": "square", "huber1": "H_κ^1", "huber2": "H_κ^2"}
KINDS = (1, 2, 3)
TAUS = (0.1, 0.2, 0.3)


def make_loss(name: str, kappa: float | None):
    if name == "square":
        return Square()
    return Huber(kappa=kappa, p=1 if name == "huber1" else 2)


def loss_axes(name: str, grids: dict) -> dict[str, Axis]:
    """The hyperparameters of a loss: λ for every loss, κ too for the Huber losses (the same grids for all)."""
    axes = {"lam": Axis(tuple(grids["lam"]), step=10, low=LAM_FLOOR)}
    if name != "square":
        axes["kappa"] = Axis(tuple(grids["kappa"]), step=3)
    return axes


def exact_estimator(name: str, params: dict, tol: float) -> FunctionalRegressor:
    return FunctionalRegressor(
        make_loss(name, params.get("kappa")),
        kernel_x=Gaussian(GAMMA_X),
        kernel_theta=Gaussian(GAMMA_THETA),
        lam=params["lam"],
        solver="admm",
        tol=tol,
    )


def exact_fit_predict(name: str, tol: float):
    def fit_predict(params, X, Y, X_new):
        return exact_estimator(name, params, tol).fit(X, Y).predict(X_new)

    return fit_predict


def rff_estimator(name: str, params: dict, rff_kwargs: dict, seed: int) -> FunctionalRegressor:
    return FunctionalRegressor(
        make_loss(name, params.get("kappa")),
        kernel_x=Gaussian(GAMMA_X),
        kernel_theta=Gaussian(GAMMA_THETA),
        lam=params["lam"],
        solver="rff",
        random_state=seed,
        **rff_kwargs,
    )


def rff_available(rff_kwargs: dict) -> str | None:
    """None if solver='rff' fits here, else the reason it does not."""
    d = make_synthetic(20, 2, m=10, p_in=10, random_state=0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rff_estimator("huber1", {"lam": 1e-3, "kappa": 0.1}, {**rff_kwargs, "n_features_x": 20}, 0).fit(
                d.X_train, d.Y_train
            ).predict(d.X_test)
    except Exception as exc:  # noqa: BLE001 - any failure means "not available", reported as is
        return f"{type(exc).__name__}: {exc}"
    return None


def run_draw(task: dict) -> list[dict]:
    """All settings of one (variant, draw): returns one record per (kind, tau, loss, solver)."""
    with limit_blas_threads(task["threads"]):
        return _run_draw(task)


def _run_draw(task: dict) -> list[dict]:
    variant, draw, seed = task["variant"], task["draw"], task["seed"]
    ss = np.random.SeedSequence([seed, 0 if variant == "linear" else 1, draw])
    data_seed, *setting_seeds = ss.spawn(1 + len(task["settings"]))
    d = make_synthetic(task["n_train"], task["n_test"], nonlinear=variant == "nonlinear", random_state=data_seed)
    records = []
    for (kind, tau), s_seed in zip(task["settings"], setting_seeds, strict=True):
        if tau > 0:
            Y, _ = add_outliers(d.Y_train, kind, tau, xi=task["xi"], zeta=task["zeta"], random_state=s_seed)
        else:
            Y = d.Y_train
        cv_seed = int(s_seed.generate_state(1)[0])
        # no outliers: the usual mean rule; outliers: the robust rule (the same for every loss); fold-NMSE: diagnostic
        rules = ("mean" if tau == 0 else "robust", "fold-nmse")
        for name in LOSSES:
            if task["reuse"] is not None:  # rff only: the (λ, κ) the exact solver's CV selected in a saved run
                records.append(task["reuse"][(kind, tau, name)])
                params = {k: records[-1][k] for k in ("lam", "kappa") if k in records[-1]}
            else:
                axes = loss_axes(name, task["grids"])
                t0 = time.perf_counter()
                sel = cv_select_widening(
                    exact_fit_predict(name, task["cv_tol"]),
                    axes,
                    d.X_train,
                    Y,
                    rules=rules,
                    n_splits=task["folds"],
                    random_state=cv_seed,
                )
                cv_time = time.perf_counter() - t0
                best = {"main": sel.best[rules[0]], "alt": sel.best[rules[1]]}
                fits = {}
                for rule in ("main", "alt"):
                    key = tuple(sorted(best[rule].items()))
                    if key not in fits:
                        with warnings.catch_warnings(record=True) as caught:
                            warnings.simplefilter("always")
                            t0 = time.perf_counter()
                            est = exact_estimator(name, best[rule], task["tol"]).fit(d.X_train, Y)
                            fit_time = time.perf_counter() - t0
                        fits[key] = (est, fit_time, len(caught))
                    fits[rule] = fits[key]
                est, fit_time, n_warn = fits["main"]
                rec = dict(
                    variant=variant,
                    draw=draw,
                    kind=kind,
                    tau=tau,
                    loss=name,
                    solver="exact",
                    **best["main"],
                    rule=rules[0],
                    edges=sel.edges[rules[0]],
                    edges_alt=sel.edges[rules[1]],
                    grids=sel.grids,
                    widened=sel.widened,
                    nmse=nmse(d.Y_test, est.predict(d.X_test)),
                    fit_time=fit_time,
                    cv_time=cv_time,
                    n_iter=int(est.n_iter_),
                    gap=float(est.duality_gap_),
                    warnings=n_warn,
                    params_alt=best["alt"],
                    nmse_alt=nmse(d.Y_test, fits["alt"][0].predict(d.X_test)),
                )
                if task["oracle"]:
                    # best clean-test NMSE over every candidate scored: what the loss can do when selection is perfect
                    fp = exact_fit_predict(name, task["cv_tol"])
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        rec["oracle_nmse"] = min(
                            nmse(d.Y_test, fp(p, d.X_train, Y, d.X_test)) for p in sel.candidates()
                        )
                records.append(rec)
                params = best["main"]
            if task["rff"]:
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    t0 = time.perf_counter()
                    est = rff_estimator(name, params, task["rff_kwargs"], cv_seed).fit(d.X_train, Y)
                    fit_time = time.perf_counter() - t0
                records.append(
                    dict(
                        variant=variant,
                        draw=draw,
                        kind=kind,
                        tau=tau,
                        loss=name,
                        solver="rff",
                        **{k: params[k] for k in ("lam", "kappa") if k in params},
                        nmse=nmse(d.Y_test, est.predict(d.X_test)),
                        fit_time=fit_time,
                        warnings=len(caught),
                        method=est.rff_method_,
                        n_iter=int(est.n_iter_),
                    )
                )
    return records


# ---------------------------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------------------------


def summarize(records: list[dict], solvers: list[str], variants: list[str], settings, oracle: bool):
    """Markdown tables (results and selection diagnostics, one each per variant) and the target checks."""
    by = {}
    for r in records:
        by.setdefault((r["variant"], r["kind"], r["tau"], r["loss"], r["solver"]), []).append(r)

    def vals(v, k, t, loss, solver, key="nmse"):
        return np.array([r[key] for r in by.get((v, k, t, loss, solver), [])], dtype=float)

    def ratio(v, k, t, loss, key="nmse"):
        sq, rb = vals(v, k, t, "square", "exact", key), vals(v, k, t, loss, "exact", key)
        return rb.mean() / sq.mean() if sq.size and rb.size else np.nan

    out, checks = [], []
    for v in variants:
        headers = ["outliers", "τ"] + [f"{LOSS_LABEL[loss]} ({s})" for s in solvers for loss in LOSSES]
        headers += ["H_κ^1 / square", "H_κ^2 / square"]
        diag_headers = ["outliers", "τ"] + [f"{LOSS_LABEL[loss]}, fold-NMSE CV" for loss in LOSSES]
        diag_headers += ["H_κ^1 / sq.", "H_κ^2 / sq."]
        if oracle:
            diag_headers += [f"{LOSS_LABEL[loss]}, oracle" for loss in LOSSES] + ["H_κ^1 / sq.", "H_κ^2 / sq."]
        sel_headers = ["outliers", "τ", "rule"] + [f"{LOSS_LABEL[loss]}: selected (mode); edges" for loss in LOSSES]
        sel_headers += ["fold-NMSE CV: edges"]
        rows, diag, sels = [], [], []
        for kind, tau in settings:
            label = "none" if tau == 0 else f"Type {kind}"
            row = [label, f"{tau:g}"]
            for s in solvers:
                row += [mean_std(vals(v, kind, tau, loss, s)) for loss in LOSSES]
            row += [fmt(ratio(v, kind, tau, loss), 2) for loss in ("huber1", "huber2")]
            rows.append(row)
            recs = {loss: by.get((v, kind, tau, loss, "exact"), []) for loss in LOSSES}
            srow = [label, f"{tau:g}", next((r["rule"] for r in recs["square"]), "—")]
            for loss in LOSSES:
                chosen = [", ".join(f"{r[k]:.3g}" for k in ("lam", "kappa") if k in r) for r in recs[loss]]
                if chosen:  # most frequent choice (first one met on ties), how many draws chose it, edge statuses
                    mode, count = Counter(chosen).most_common(1)[0]
                    srow.append(f"{mode} ({count}/{len(chosen)}); {edge_counts([r['edges'] for r in recs[loss]])}")
                else:
                    srow.append("—")
            srow.append(
                "; ".join(f"{LOSS_LABEL[loss]} {edge_counts([r['edges_alt'] for r in recs[loss]])}" for loss in LOSSES)
            )
            sels.append(srow)
            drow = [label, f"{tau:g}"]
            drow += [mean_std(vals(v, kind, tau, loss, "exact", "nmse_alt")) for loss in LOSSES]
            drow += [fmt(ratio(v, kind, tau, loss, "nmse_alt"), 2) for loss in ("huber1", "huber2")]
            if oracle:
                drow += [mean_std(vals(v, kind, tau, loss, "exact", "oracle_nmse")) for loss in LOSSES]
                drow += [fmt(ratio(v, kind, tau, loss, "oracle_nmse"), 2) for loss in ("huber1", "huber2")]
            diag.append(drow)
            if tau > 0:
                for loss in ("huber1", "huber2"):
                    rb, sq = vals(v, kind, tau, loss, "exact"), vals(v, kind, tau, "square", "exact")
                    if not rb.size:
                        continue
                    cut = 1 - ratio(v, kind, tau, loss)
                    required = kind in (1, 2) or loss == "huber1"
                    checks.append(
                        dict(
                            variant=v,
                            kind=kind,
                            tau=tau,
                            loss=loss,
                            cut=cut,
                            required=required,
                            met=bool(cut >= 0.3),
                            wins=float(np.mean(rb < sq)),
                            cut_alt=1 - ratio(v, kind, tau, loss, "nmse_alt"),
                            cut_oracle=(1 - ratio(v, kind, tau, loss, "oracle_nmse")) if oracle else None,
                        )
                    )
        out.append(
            (v, markdown_table(headers, rows), markdown_table(diag_headers, diag), markdown_table(sel_headers, sels))
        )
    return out, checks


def plot(records, variants, settings, solvers, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({k for k, t in settings if t > 0})
    fig, axes = plt.subplots(
        len(variants), len(kinds), figsize=(3.2 * len(kinds), 2.6 * len(variants)), squeeze=False, sharex=True
    )
    colors = {"square": "C3", "huber1": "C0", "huber2": "C2"}
    tex = {"square": "square", "huber1": r"$H_\kappa^1$", "huber2": r"$H_\kappa^2$"}
    for i, v in enumerate(variants):
        for j, kind in enumerate(kinds):
            ax = axes[i, j]
            taus = [0.0] + sorted({t for k, t in settings if k == kind and t > 0})
            for s in solvers:
                for loss in LOSSES:
                    mean, std = [], []
                    for t in taus:
                        k_ = kind if t > 0 else settings[0][0]
                        x = [
                            r["nmse"]
                            for r in records
                            if r["variant"] == v
                            and r["kind"] == k_
                            and r["tau"] == t
                            and r["loss"] == loss
                            and r["solver"] == s
                        ]
                        mean.append(np.mean(x) if x else np.nan)
                        std.append(np.std(x) if x else np.nan)
                    ax.errorbar(
                        taus,
                        mean,
                        yerr=std,
                        color=colors[loss],
                        ls="-" if s == "exact" else "--",
                        marker="o" if s == "exact" else "x",
                        ms=3,
                        capsize=2,
                        lw=1,
                        label=f"{tex[loss]} ({s})",
                    )
            ax.set_yscale("log")
            ax.set_title(f"{v}, Type {kind}", fontsize=9)
            ax.tick_params(labelsize=7)
            if i == len(variants) - 1:
                ax.set_xlabel("τ (share of corrupted curves)", fontsize=8)
            if j == 0:
                ax.set_ylabel("clean test NMSE", fontsize=8)
    axes[0, 0].legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--draws", type=int, default=None, help="draws of the data (default 10; 2 with --quick)")
    parser.add_argument("--variants", nargs="+", default=["linear", "nonlinear"], choices=["linear", "nonlinear"])
    parser.add_argument("--solvers", nargs="+", default=["exact", "rff"], choices=["exact", "rff"])
    parser.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    parser.add_argument("--xi", type=float, default=0.3, help="Type 3: share of a curve's values replaced")
    parser.add_argument("--zeta", type=float, default=2.0, help="Type 2: outlier intensity ζ")
    parser.add_argument("--n-features", type=int, default=1000, help="rff: D_x random features (default 1000)")
    parser.add_argument("--oracle", action="store_true", help="also report the best clean-test NMSE on the grid")
    parser.add_argument(
        "--rff-method",
        default="auto",
        choices=["auto", "sgd"],
        help="rff: fit_rff's rff_method (default auto: the square loss in closed form, the Huber losses by MM "
        "passes; sgd: DSGD, the route before MM, with the three options below)",
    )
    parser.add_argument("--rff-batch-size", type=int, default=16, help="rff with sgd: DSGD minibatch (default 16)")
    parser.add_argument("--rff-epochs", type=float, default=100, help="rff with sgd: DSGD epochs (default 100)")
    parser.add_argument(
        "--rff-precondition",
        type=int,
        default=50,
        help="rff with sgd: precondition_rank of DSGD (default 50; 0: plain DSGD, which is slow at small λ)",
    )
    parser.add_argument(
        "--rff-max-iter",
        type=int,
        default=None,
        help="rff: MM passes at most (the estimator's max_iter; default: fit_rff's max_passes)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="worker processes over (variant, draw) (default: 2, or 1 on a single core)",
    )
    parser.add_argument(
        "--rff-only",
        action="store_true",
        help="add the rff columns to the saved full run (benchmarks/results/robustness.json) with its "
        "selected (λ, κ), without redoing the exact solver's cross-validation",
    )
    args = parser.parse_args(argv)
    saved = None
    if args.rff_only:
        saved = json.loads((RESULTS / ("robustness_quick.json" if args.quick else "robustness.json")).read_text())
        for k in ("draws", "variants", "folds", "xi", "zeta", "oracle", "seed", "quick"):
            setattr(args, k, saved["args"][k])
        args.solvers = ["exact", "rff"]

    # starting grids, the same for every loss (a selection at an edge widens them: benchmarks/_common.py)
    if args.quick:
        draws = args.draws or 2
        grids = {"lam": [1e-8, 1e-6, 1e-4], "kappa": [0.01, 0.1]}
        taus = (0.2,)
    else:
        draws = args.draws or 10
        # (the earlier grids' selections, 1e-6 for every Huber fit, sit inside; small λ with small κ costs up to the
        # 2000 ADMM iterations per fit, so the grid reaches further only where a selection asks for it)
        grids = {"lam": [1e-8, 1e-7, 1e-6, 1e-5, 1e-4], "kappa": [0.01, 0.03, 0.1, 0.3]}
        taus = TAUS
    settings = [(1, 0.0)] + [(k, t) for k in KINDS for t in taus]
    rff_kwargs = {"n_features_x": args.n_features, "rff_method": args.rff_method}
    if args.rff_max_iter is not None:
        rff_kwargs["max_iter"] = args.rff_max_iter
    if args.rff_method == "sgd":
        rff_kwargs.update(
            batch_size=args.rff_batch_size, n_epochs=args.rff_epochs, precondition_rank=args.rff_precondition
        )
    reuse: dict = {}
    if saved is not None:
        grids = saved["grids"]
        for r in saved["records"]:
            if r["solver"] == "exact":
                reuse.setdefault((r["variant"], r["draw"]), {})[(r["kind"], r["tau"], r["loss"])] = r
    solvers = list(args.solvers)
    rff_note = ""
    if "rff" in solvers:
        reason = rff_available(rff_kwargs)
        if reason is not None:
            solvers.remove("rff")
            rff_note = f"The random-feature solver was not run: `{reason}`."
            print(rff_note, file=sys.stderr)
            if args.rff_only:
                return 1

    info = machine_info(args.threads)
    tasks = [
        dict(
            variant=v,
            draw=r,
            seed=args.seed,
            settings=settings,
            n_train=100,
            n_test=100,
            xi=args.xi,
            zeta=args.zeta,
            grids=grids,
            folds=args.folds,
            cv_tol=1e-4,
            tol=1e-6,
            oracle=args.oracle,
            rff="rff" in solvers,
            rff_kwargs=rff_kwargs,
            threads=args.threads,
            reuse=reuse[(v, r)] if saved is not None else None,
        )
        for v in args.variants
        for r in range(draws)
    ]
    t0 = time.perf_counter()
    records: list[dict] = []
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            for i, recs in enumerate(pool.map(run_draw, tasks)):
                records += recs
                print(f"[{time.perf_counter() - t0:7.1f}s] {i + 1}/{len(tasks)} draws done", flush=True)
    else:
        for i, task in enumerate(tasks):
            records += run_draw(task)
            print(f"[{time.perf_counter() - t0:7.1f}s] {i + 1}/{len(tasks)} draws done", flush=True)
    wall = time.perf_counter() - t0
    rff_wall = None
    argv = list(sys.argv)
    if saved is not None:
        rff_wall, wall = wall, saved["wall_seconds"]
        info = saved["info"]  # the exact solver's run; the rff pass is dated below
        a = saved["args"]
        argv = saved.get("argv") or [
            sys.argv[0],
            "--solvers",
            *a["solvers"],
            *(["--oracle"] if a["oracle"] else []),
            "--jobs",
            str(a["jobs"]),
        ]

    tables, checks = summarize(records, solvers, args.variants, settings, args.oracle)
    fig_path = figure_path("robustness", args.quick or args.no_readme)
    plot(records, args.variants, settings, solvers, fig_path)
    save_json(
        "robustness_quick" if args.quick else "robustness",
        dict(
            args=vars(args) | {"readme": str(args.readme)},
            info=info,
            grids=grids,
            records=records,
            checks=checks,
            wall_seconds=wall,
            rff_wall_seconds=rff_wall,
            argv=argv,
            rff_info=machine_info(args.threads) if saved is not None else None,
        ),
    )
    for v, table, diag, sel in tables:
        print(f"\n{v}\n{table}\n\n{sel}\n\n{diag}")

    exact_times = [r["fit_time"] for r in records if r["solver"] == "exact" and r["loss"] != "square"]
    rff_times = [r["fit_time"] for r in records if r["solver"] == "rff" and r["loss"] != "square"]
    cv_times = [r["cv_time"] for r in records if r["solver"] == "exact"]
    required = [c for c in checks if c["required"]]
    met = [c for c in required if c["met"]]
    exact_recs = [r for r in records if r["solver"] == "exact"]
    grid_text = "; ".join(
        f"{LOSS_LABEL[loss]}: "
        + widening_text(loss_axes(loss, grids), [r["grids"] for r in exact_recs if r["loss"] == loss])
        for loss in LOSSES
    )
    rff_recs = [r for r in records if r["solver"] == "rff" and r["loss"] != "square"]
    if args.rff_method == "sgd":
        rff_text = (
            f"rff columns: solver='rff' with D_x = {args.n_features} random features (exact output factor), "
            f"`rff_method='sgd'`: DSGD with minibatches of {args.rff_batch_size} curves for {args.rff_epochs:g} "
            "epochs from the closed-form warm start (reweighted closed forms for the Huber losses), "
            + (
                f"preconditioned with rank {args.rff_precondition}, "
                if args.rff_precondition
                else "plain steps (no preconditioning), "
            )
            + "and the (λ, κ) selected for the exact solver. "
        )
    else:
        from rffor.solvers.rff import RFF_DEFAULTS

        cap = args.rff_max_iter or RFF_DEFAULTS["max_passes"]
        passes = np.median([r["n_iter"] for r in rff_recs]) if rff_recs else float("nan")
        capped = sum(r["n_iter"] >= cap for r in rff_recs)
        rff_text = (
            f"rff columns: solver='rff' with n_features_x = {args.n_features} and fit_rff's defaults otherwise "
            "(`input_features='auto'`: Nyström features, whose centres are all the n = 100 training curves here, so "
            "that the square loss is the exact solver's model; `rff_method='auto'`): the square loss in closed "
            "form, the Huber losses by full-batch MM passes from the square-loss closed form (until the bound "
            f"promises a relative decrease below 1e-6, at most {cap} passes; median {passes:g} passes, "
            f"{capped} of {len(rff_recs)} fits stopped at that cap), in this process; the (λ, κ) are those "
            "selected for the exact solver. "
        )
    lines = [
        "### Robustness to outliers (paper 000, Figure 2)",
        "",
        provenance(info, argv, load_end=None if saved is not None else os.getloadavg()),
        "",
        f"Synthetic data of MATH.md §7 (n = 100 training, 100 clean test curves, m = 100), {draws} draws, Gaussian "
        f"kernels γ_X = {GAMMA_X}, γ_Θ = {GAMMA_THETA:g}, exact solver ADMM (relative gap 1e-6; 1e-4 inside "
        f"cross-validation). λ and κ are selected by {args.folds}-fold cross-validation on the training set, the "
        "same rule for every loss: with outliers (corrupted validation curves too) the **median of the fold "
        "scores**, a fold's score being the **median over its validation curves of the per-curve MSE** (paper 000 "
        '§5.1: on corrupted data "the mean was replaced with median"); without outliers (τ = 0) the usual mean '
        "rule (a fold's NMSE, mean over folds). "
        f"Starting grids, the same for every loss: λ ∈ {format_grid(grids['lam'])}, κ ∈ "
        f"{format_grid(grids['kappa'])} (Huber losses; output units, MATH.md §2). A selection at an edge of a grid "
        "widens it (λ by factors of 10, κ by 3; `cv_select_widening` in benchmarks/_common.py) until the selected "
        "value is interior, one more value improved the CV score by less than 1% (*flat*), or λ reaches "
        f"{LAM_FLOOR:g} (*low limit*: the regularised Gram matrix's condition number, about 1/(λm), reaches 1e12), "
        "else the run fails; "
        "the selection table below gives, per loss and setting, the selected values and whether any was at an "
        f"edge. Grids searched: {grid_text}. "
        f"Type 1 pairs inputs "
        f"with negated outputs of other corrupted samples, Type 2 replaces the curve (ζ = {args.zeta:g}), Type 3 "
        f"replaces ξ = {args.xi:g} of a curve's values by U[−b_max, b_max]. Entries: clean test NMSE, mean ± std "
        "over draws (each draw: new data, new corruption, same data across the settings of a draw); ratio "
        "columns: mean robust NMSE / mean square NMSE (exact solver; ≤ 0.7 is the 30% cut of the target). "
        + (rff_text if "rff" in solvers else "")
        + rff_note,
        "",
        "The diagnostics table shows what two other selection rules give from the same fits: *fold-NMSE CV* scores "
        "a validation fold by its NMSE (the mean over its curves, so its corrupted curves count in full), then takes "
        "the median over folds"
        + (
            "; *oracle* is the best clean-test NMSE over every candidate the cross-validation scored (perfect "
            "selection: what the loss itself can do)."
            if args.oracle
            else "."
        ),
        "",
    ]
    for v, table, diag, sel in tables:
        lines += [
            f"**{v} variant**",
            "",
            table,
            "",
            f"*{v} variant, selection (exact solver): the rule, the most frequent selected λ (, κ) with how many "
            "draws chose it, and the selections at an edge (interior n/n: none)*",
            "",
            sel,
            "",
            f"*{v} variant, selection diagnostics (exact solver)*",
            "",
            diag,
            "",
        ]
    missed = [c for c in required if not c["met"]]
    lines += [
        f"Targets (a robust loss cuts the square loss's clean test NMSE by ≥ 30%: both Huber losses for Types 1 "
        f"and 2, H_κ^1 for Type 3, with the selection rule above): **{len(met)} of {len(required)} required settings "
        "met**."
        + (
            " Missed: "
            + "; ".join(
                f"{c['variant']} Type {c['kind']} τ={c['tau']:g} {LOSS_LABEL[c['loss']]} (cut {100 * c['cut']:.0f}%; "
                f"fold-NMSE CV {100 * c['cut_alt']:.0f}%"
                + (f", oracle {100 * c['cut_oracle']:.0f}%" if c["cut_oracle"] is not None else "")
                + ")"
                for c in missed
            )
            + "."
            if missed
            else ""
        ),
        "",
        f"Time: the whole run took {wall / 60:.1f} min ({args.jobs} process(es)); per setting and loss, the "
        f"cross-validation took {np.median(cv_times):.2f} s (median), the final exact fit of a Huber loss "
        f"{np.median(exact_times):.3f} s (median)"
        + (f", the rff fit {np.median(rff_times):.3f} s (median)" if rff_times else "")
        + "."
        + (
            f" The rff columns were added by `python benchmarks/robustness.py {' '.join(sys.argv[1:])}` on "
            f"{machine_info()['date']} in {rff_wall / 60:.1f} min (load average "
            f"{'/'.join(f'{x:.1f}' for x in os.getloadavg())})."
            if rff_wall is not None
            else ""
        ),
        "",
        f"![robustness](figures/{fig_path.name})",
    ]
    if not (args.no_readme or args.quick):  # a quick run is a smoke test: it never replaces the published tables
        write_section("robustness", "\n".join(lines), args.readme)
    print("\n".join(lines[-6:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
