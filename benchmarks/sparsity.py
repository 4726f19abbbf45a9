"""Sparsity against accuracy of the ε-insensitive losses (paper 000, §5.1 and Figure 1).

Synthetic data of MATH.md §7 (the paper's linear variant by default) with i.i.d. Gaussian noise of standard
deviation 0.5 on the training outputs; clean test curves. For every (λ, ε) on a grid, ℓ_ε^2 and ℓ_ε^∞ are fitted
with the exact solver (ADMM, splines) and we record the clean test NMSE and the sparsity of the dual matrix A of
MATH.md (D_s): the share of zero rows for ℓ_ε^2 (a zero row is a training curve that drops out of the model) and
the share of zero entries for ℓ_ε^∞. ε is in output units (MATH.md §2): the paper's ε is m times ours.

Writes the ``sparsity`` block of benchmarks/README.md, benchmarks/figures/sparsity.png and
benchmarks/results/sparsity.json.

Usage::

    python benchmarks/sparsity.py           # full grid, 5 draws (a few minutes)
    python benchmarks/sparsity.py --quick
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    add_common_args,
    args_record,
    cv_select,
    figure_path,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    nmse,
    provenance,
    save_json,
    write_section,
)

from rffor import FunctionalRegressor  # noqa: E402
from rffor.datasets import make_synthetic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import EpsilonInsensitive  # noqa: E402

GAMMA_X, GAMMA_THETA = 0.01, 100.0
LOSSES = {"l2": ("ℓ_ε^2", 2, "zero rows"), "linf": ("ℓ_ε^∞", np.inf, "zero entries")}


def sparsity(A: np.ndarray, p) -> float:
    if p == 2:
        return float(np.mean(np.all(A == 0, axis=1)))
    return float(np.mean(A == 0))


def run(args, lams, epsilons, draws):
    records = []
    for r in range(draws):
        d = make_synthetic(
            args.n_train,
            args.n_test,
            nonlinear=args.variant == "nonlinear",
            noise=args.noise,
            random_state=np.random.SeedSequence([args.seed, 11, r]),
        )
        for key, (_, p, _) in LOSSES.items():
            # every cell's 5-fold CV score (mean rule: the validation curves are noisy like the training ones), for
            # the trade-off selections of the summary; the same folds for every cell of a draw
            grid = [dict(lam=lam, eps=eps) for lam in lams for eps in epsilons]

            def fit_predict(q, Xa, Ya, Xb, p=p):
                return FunctionalRegressor(
                    EpsilonInsensitive(epsilon=q["eps"], p=p), kernel_x=Gaussian(GAMMA_X),
                    kernel_theta=Gaussian(GAMMA_THETA), lam=q["lam"], solver="admm", tol=args.tol,
                ).fit(Xa, Ya).predict(Xb)  # fmt: skip

            _, fold_scores = cv_select(fit_predict, grid, d.X_train, d.Y_train, n_splits=5, random_state=r,
                                       aggregate=np.mean)  # fmt: skip
            cv_score = {(q["lam"], q["eps"]): float(np.mean(f)) for q, f in zip(grid, fold_scores, strict=True)}
            for lam in lams:
                for eps in epsilons:
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always")
                        t0 = time.perf_counter()
                        est = FunctionalRegressor(
                            EpsilonInsensitive(epsilon=eps, p=p),
                            kernel_x=Gaussian(GAMMA_X),
                            kernel_theta=Gaussian(GAMMA_THETA),
                            lam=lam,
                            solver="admm",
                            tol=args.tol,
                        ).fit(d.X_train, d.Y_train)
                        fit_time = time.perf_counter() - t0
                    records.append(
                        dict(
                            draw=r,
                            loss=key,
                            lam=lam,
                            eps=eps,
                            nmse=nmse(d.Y_test, est.predict(d.X_test)),
                            cv_score=cv_score[(lam, eps)],
                            sparsity=sparsity(est.dual_coef_, p),
                            fit_time=fit_time,
                            n_iter=int(est.n_iter_),
                            warnings=len(caught),
                        )
                    )
        print(f"draw {r + 1}/{draws} done", flush=True)
    return records


def tradeoff(records: list[dict], key: str, level: float, label: str, what: str) -> str:
    """The sparsity-accuracy trade-off of one loss chosen on held-out data: in each draw, the cell of lowest CV score
    among those whose training fit is at least ``level`` sparse; its test NMSE against the unconstrained CV choice's.
    Returns "" if no draw has a cell that sparse."""
    chosen, ratios, edges = [], [], 0
    lams = sorted({r["lam"] for r in records})
    epsilons = sorted({r["eps"] for r in records})
    for draw in sorted({r["draw"] for r in records}):
        rs = [r for r in records if r["loss"] == key and r["draw"] == draw]
        ok = [r for r in rs if r["sparsity"] >= level]
        if not ok:
            continue
        pick = min(ok, key=lambda r: r["cv_score"])
        free = min(rs, key=lambda r: r["cv_score"])
        chosen.append(pick)
        ratios.append(pick["nmse"] / free["nmse"])
        edges += pick["lam"] in (lams[0], lams[-1]) or pick["eps"] == epsilons[-1]
    if not chosen:
        return ""
    cells = Counter(f"λ = {r['lam']:g}, ε = {r['eps']:g}" for r in chosen).most_common(1)[0]
    head = "no sparsity condition" if level == 0 else f"≥ {100 * level:.0f}% {what}"
    return (
        f"{label}, {head}: test NMSE {fmt(np.mean([r['nmse'] for r in chosen]))} "
        f"({np.mean(ratios):.2f}× the unconstrained choice's), {100 * np.mean([r['sparsity'] for r in chosen]):.0f}% "
        f"{what}, most often {cells[0]} ({cells[1]}/{len(chosen)} draws)"
        + (f", on the grid's edge in {edges}/{len(chosen)}" if edges else "")
    )


def grids(records, key, lams, epsilons, field):
    G = np.full((len(lams), len(epsilons)), np.nan)
    for i, lam in enumerate(lams):
        for j, eps in enumerate(epsilons):
            v = [r[field] for r in records if r["loss"] == key and r["lam"] == lam and r["eps"] == eps]
            G[i, j] = np.mean(v)
    return G


def plot(records, lams, epsilons, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tex = {"l2": r"$\ell_\varepsilon^2$", "linf": r"$\ell_\varepsilon^\infty$"}
    fig, axes = plt.subplots(2, 2, figsize=(8, 5.6))
    for i, key in enumerate(LOSSES):
        for j, (field, title, cmap) in enumerate(
            (("nmse", "clean test NMSE (log10)", "viridis"), ("sparsity", LOSSES[key][2] + " (share)", "magma"))
        ):
            G = grids(records, key, lams, epsilons, field)
            ax = axes[i, j]
            im = ax.imshow(
                np.log10(G) if field == "nmse" else G,
                aspect="auto",
                origin="lower",
                cmap=cmap,
                vmin=None if field == "nmse" else 0,
                vmax=None if field == "nmse" else 1,
            )
            ax.set_xticks(range(len(epsilons)), [f"{e:g}" for e in epsilons], fontsize=7)
            ax.set_yticks(range(len(lams)), [f"{x:g}" for x in lams], fontsize=7)
            ax.set_xlabel("ε (output units)", fontsize=8)
            ax.set_ylabel("λ", fontsize=8)
            ax.set_title(f"{tex[key]}: {title}", fontsize=9)
            fig.colorbar(im, ax=ax)
    fig.tight_layout()
    path.parent.mkdir(exist_ok=True)
    fig.savefig(path, dpi=75)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser)
    parser.add_argument("--draws", type=int, default=None, help="draws (default 5; 1 with --quick)")
    parser.add_argument("--variant", choices=["linear", "nonlinear"], default="linear")
    parser.add_argument("--noise", type=float, default=0.5, help="std of the Gaussian noise on training outputs")
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--n-test", type=int, default=100)
    parser.add_argument("--tol", type=float, default=1e-6, help="relative duality gap of the exact solver")
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)
    if args.quick:
        draws = args.draws or 1
        lams, epsilons = [1e-5, 1e-3], [0.0, 0.3, 0.6]
    else:
        draws = args.draws or 5
        lams = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2]
        epsilons = [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.8, 1.0]
    info = machine_info(args.threads)
    t0 = time.perf_counter()
    records = run(args, lams, epsilons, draws)
    wall = time.perf_counter() - t0
    fig_path = figure_path("sparsity", args.quick or args.no_readme)
    plot(records, lams, epsilons, fig_path)
    save_json(
        "sparsity_quick" if args.quick else "sparsity",
        dict(
            info=info,
            argv=sys.argv,
            args=args_record(args),
            lams=lams,
            epsilons=epsilons,
            records=records,
            wall_seconds=wall,
        ),
    )

    lines = [
        "### Sparsity against accuracy of the ε-insensitive losses (paper 000, Figure 1)",
        "",
        provenance(info, load_end=os.getloadavg()),
        "",
        f"{args.variant.capitalize()} synthetic data (MATH.md §7), n = {args.n_train} training curves with i.i.d. "
        f"N(0, {args.noise:g}²) noise, {args.n_test} clean test curves, m = 100, {draws} draws; Gaussian kernels "
        f"γ_X = {GAMMA_X}, γ_Θ = {GAMMA_THETA:g}; exact solver (ADMM, relative gap {args.tol:g}). Each cell: mean "
        "clean test NMSE / mean sparsity of the dual matrix A (ℓ_ε^2: share of zero rows, i.e. training curves "
        "that do not enter the model; ℓ_ε^∞: share of zero entries). ε in output units (the paper's ε is 100× "
        "ours here); ε = 0 is the square loss.",
        "",
    ]
    summary = []
    for key, (label, _, what) in LOSSES.items():
        N = grids(records, key, lams, epsilons, "nmse")
        S = grids(records, key, lams, epsilons, "sparsity")
        rows = [
            [f"{lam:g}"] + [f"{fmt(N[i, j])} / {100 * S[i, j]:.0f}%" for j in range(len(epsilons))]
            for i, lam in enumerate(lams)
        ]
        lines += [
            f"**{label}** (NMSE / {what})",
            "",
            markdown_table(["λ \\ ε"] + [f"{e:g}" for e in epsilons], rows),
            "",
        ]
        for level in (0.0, 0.25, 0.5, 0.75):
            summary.append(tradeoff(records, key, level, label, what))
    fit_times = [r["fit_time"] for r in records]
    n_warn = sum(r["warnings"] for r in records)
    lines += [
        "Trade-off, chosen on held-out data only: in each draw, of the grid's cells whose fit on the training curves "
        "has at least the given sparsity, the one of lowest 5-fold cross-validation score (mean rule: a fold's "
        "NMSE on its noisy validation curves, mean over folds; the same folds for every cell), then its clean "
        "test NMSE (mean over draws, and its ratio to that of the cell chosen the same way without the sparsity "
        "condition, mean of the per-draw ratios). The grid is the figure's, not widened: a choice on its edge is "
        "counted. " + "; ".join(s for s in summary if s) + ".",
        "",
        f"{len(records)} fits, median {np.median(fit_times):.3f} s each; {n_warn} fits stopped at max_iter "
        f"(ConvergenceWarning). Whole run {wall / 60:.1f} min.",
        "",
        f"![sparsity](figures/{fig_path.name})",
    ]
    text = "\n".join(lines)
    print(text)
    if not (args.no_readme or args.quick):
        write_section("sparsity", text, args.readme)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
