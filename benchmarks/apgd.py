"""Benchmark of the exact solvers (issue 2, item 8): APGD and ADMM on the dual (D_s) of MATH.md §3.1.

For each n, the five losses and both solvers: iterations and time to a relative duality gap of 1e-6, with the
floor measured in the same run — one product K_X V K_Θ and the eigendecompositions of K_X and K_Θ — and the time
per iteration as a ratio to that product (target for APGD: within 1.5x). Paper 000's setup (MATH.md §7): synthetic
Gaussian-process curves on 100-point grids with 10% Type 2 outliers, λ = 1e-5, κ = 0.05, ε = 0.1 (our units),
Gaussian kernels γ_x = 0.01 on the input curves and γ_θ = 100.

Run from the repository root::

    python benchmarks/apgd.py               # n in {100, 300, 1000, 3000}, m = 100 (about 10 minutes); writes
                                            # the "Exact solvers" section of benchmarks/README.md
    python benchmarks/apgd.py --quick       # n in {100, 300}, a smoke run of a few seconds
    python benchmarks/apgd.py --threads 0   # BLAS with its default threads (default here: 1, see _common.py)

Times are wall-clock seconds on whatever machine runs this; the eigendecompositions are computed once per n and
shared by all fits (``eig`` column), so the total time of one fit is ``eig + solve``. Raw rows go to
``benchmarks/results/apgd.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    add_common_args,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    save_json,
    write_section,
)
from sklearn.exceptions import ConvergenceWarning

from rffor._linalg import eigh_psd
from rffor.datasets import add_outliers, make_synthetic
from rffor.kernels import Gaussian
from rffor.losses import EpsilonInsensitive, Huber, Square
from rffor.solvers.admm import solve_admm
from rffor.solvers.apgd import solve_apgd
from rffor.solvers.dual import DualProblem

LOSSES = {
    "square": lambda a: Square(),
    "huber2": lambda a: Huber(kappa=a.kappa, p=2),
    "huber1": lambda a: Huber(kappa=a.kappa, p=1),
    "eps2": lambda a: EpsilonInsensitive(epsilon=a.epsilon, p=2),
    "epsinf": lambda a: EpsilonInsensitive(epsilon=a.epsilon, p=math.inf),
}
SOLVERS = {"apgd": solve_apgd, "admm": solve_admm}


def median_time(f, repeat: int) -> float:
    f()  # warm-up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def run_fit(solver, problem, *, tol, max_iter):
    """Solve once; returns (result, total seconds, seconds per iteration, seconds per kernel product).

    The time per iteration is measured between the first and the last callback, so it excludes the warm start and
    the first certificate. The products ``c K_X A K_Θ`` that the solver itself computes (APGD: one per iteration;
    ADMM works in the eigenbasis and computes none) are timed inside the same loop: on a machine whose speed
    drifts, their mean is the floor to compare the iteration with."""
    stamps = []
    prod = [0.0, 0]
    kernel_product = problem.kernel_product

    def timed_product(A):
        t = time.perf_counter()
        out = kernel_product(A)
        prod[0] += time.perf_counter() - t
        prod[1] += 1
        return out

    problem.kernel_product = timed_product
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            res = solver(
                problem, tol=tol, max_iter=max_iter, callback=lambda it, A, gap: stamps.append(time.perf_counter())
            )
    finally:
        del problem.kernel_product
    total = time.perf_counter() - t0
    if len(stamps) >= 2:
        per_iter = (stamps[-1] - stamps[0]) / (len(stamps) - 1)
    else:
        per_iter = total / max(res.n_iter, 1)
    return res, total, per_iter, (prod[0] / prod[1] if prod[1] > 1 else math.nan)


def bench_n(n: int, args) -> list[dict]:
    m = args.m
    data = make_synthetic(n, 0, m=m, p_in=args.p_in, random_state=args.seed)
    Y, _ = add_outliers(data.Y_train, 2, args.tau, random_state=args.seed + 1)
    K_x = Gaussian(args.gamma_x).gram(data.X_train)
    K_t = Gaussian(args.gamma_theta).gram(data.theta)
    V = np.random.default_rng(0).standard_normal((n, m))

    def product():
        return K_x @ V @ K_t

    t_prod = median_time(product, args.repeat)
    t_eig_x = median_time(lambda: eigh_psd(K_x), max(1, args.repeat // 4))
    t_eig_t = median_time(lambda: eigh_psd(K_t), max(1, args.repeat // 4))
    eig_x, eig_t = eigh_psd(K_x), eigh_psd(K_t)
    rows = []
    for loss_name in args.losses:
        loss = LOSSES[loss_name](args)
        problem = DualProblem.splines(K_x, K_t, Y, args.lam, loss, eig_x=eig_x, eig_theta=eig_t)
        for solver_name in args.solvers:
            max_iter = args.max_iter_admm if solver_name == "admm" else args.max_iter_apgd
            if solver_name == "apgd" and n >= 3000:
                max_iter = min(max_iter, args.max_iter_apgd_3000)
            # the machine's speed drifts (shared cores): the floor is re-measured around every fit
            before = median_time(product, args.repeat_fit)
            res, total, per_iter, in_loop = run_fit(SOLVERS[solver_name], problem, tol=args.tol, max_iter=max_iter)
            t_fit_prod = 0.5 * (before + median_time(product, args.repeat_fit))
            rows.append(
                dict(
                    n=n,
                    loss=loss_name,
                    solver=solver_name,
                    iters=res.n_iter,
                    gap=res.gap,
                    converged=res.converged,
                    max_iter=max_iter,
                    solve=total,
                    per_iter=per_iter if res.n_iter else math.nan,
                    ratio=per_iter / t_fit_prod if res.n_iter else math.nan,
                    prod=t_fit_prod,
                    in_loop=in_loop,
                    ratio_in_loop=per_iter / in_loop if res.n_iter else math.nan,
                    eig=t_eig_x + t_eig_t,
                    total=total + t_eig_x + t_eig_t,
                )
            )
            r = rows[-1]
            print(
                f"n={n:5d} {loss_name:7s} {solver_name:5s} iters={r['iters']:6d}{'' if r['converged'] else '*'} "
                f"gap={r['gap']:.1e} solve={r['solve']:8.3f}s per_iter={1e3 * r['per_iter']:7.2f}ms "
                f"({r['ratio']:.2f}x product of {1e3 * r['prod']:.2f}ms; {r['ratio_in_loop']:.2f}x the in-loop "
                f"product of {1e3 * r['in_loop']:.2f}ms) eig+solve={r['total']:8.3f}s",
                flush=True,
            )
    print(
        f"n={n:5d} floor: product K_X V K_Θ {1e3 * t_prod:.2f} ms, eigh(K_X) {t_eig_x:.3f} s, "
        f"eigh(K_Θ) {t_eig_t:.4f} s",
        flush=True,
    )
    return rows


def markdown(rows: list[dict]) -> str:
    headers = [
        "n",
        "loss",
        "solver",
        "iterations",
        "rel. gap",
        "solve (s)",
        "eig (s)",
        "eig + solve (s)",
        "per iteration (ms)",
        "product alone (ms)",
        "per iteration / product alone",
        "product in the loop (ms)",
        "per iteration / product in the loop",
    ]
    body = []
    for r in rows:
        iters = f"{r['iters']}" if r["converged"] else f"{r['iters']} (cap)"
        body.append(
            [
                r["n"],
                r["loss"],
                r["solver"],
                iters,
                f"{r['gap']:.1e}",
                f"{r['solve']:.3f}",
                f"{r['eig']:.3f}",
                f"{r['total']:.3f}",
                _ms(r["per_iter"]),
                _ms(r["prod"]),
                _x(r["ratio"]),
                _ms(r["in_loop"]),
                _x(r["ratio_in_loop"]),
            ]
        )
    return markdown_table(headers, body)


def _ms(x: float) -> str:
    return "—" if math.isnan(x) else f"{1e3 * x:.2f}"


def _x(x: float) -> str:
    return "—" if math.isnan(x) else f"{x:.2f}"


def summary(rows: list[dict], args) -> list[str]:
    """Sentences on the issue's targets, computed from the rows."""
    out = []
    for n in sorted({r["n"] for r in rows}):
        apgd = [r for r in rows if r["n"] == n and r["solver"] == "apgd" and r["iters"] > 0]
        if apgd:
            alone = [r["ratio"] for r in apgd]
            loop = [r["ratio_in_loop"] for r in apgd]
            capped = [r["loss"] for r in apgd if not r["converged"]]
            out.append(
                f"n = {n}: APGD iteration / product alone {min(alone):.2f}–{max(alone):.2f}x, / product in the loop "
                f"{min(loop):.2f}–{max(loop):.2f}x"
                + (
                    f"; stopped at the cap of {apgd[0]['max_iter']} iterations for {', '.join(capped)}"
                    if capped
                    else ""
                )
                + "."
            )
    ref = [r for r in rows if r["n"] == 1000 and r["solver"] == "admm"]
    if ref:
        worst = max(r["total"] for r in ref)
        out.append(
            "n = 1000, ADMM, eigendecompositions included: "
            + ", ".join(f"{r['loss']} {r['total']:.2f} s ({r['iters']} it.)" for r in ref)
            + f"; slowest {worst:.2f} s ({'under' if worst < 1 else 'over'} the 1 s target), "
            f"{60 / worst:.0f}x faster than the ~60 s of paper 000's reference implementation "
            "(1,000–1,400 iterations × 55–70 ms)."
        )
        apgd = [r for r in rows if r["n"] == 1000 and r["solver"] == "apgd" and r["iters"] > 0]
        if apgd:
            out.append(
                "n = 1000, APGD: " + ", ".join(f"{r['loss']} {r['total']:.1f} s ({r['iters']} it.)" for r in apgd) + "."
            )
    return out


NOTES = [
    "APGD evaluates the duality gap every 10 iterations (`check_every`, the last iteration included): the "
    "certificate is a loss evaluation, O(nm), and no longer weighs on every iteration.",
    "Below n ≈ 1000 an APGD iteration is dominated by its O(nm) elementwise work and the fixed cost of about 20 "
    "NumPy calls, so its ratio to the O(n²m + nm²) product grows as n shrinks; from n = 1000 on it is within the "
    "1.5x target.",
    "An ADMM iteration costs three rotations (about 3x the product) but ADMM needs tens of iterations where APGD "
    "needs hundreds.",
    "BLAS runs single-threaded here (the default of these scripts). With BLAS's default threads on this shared, "
    "oversubscribed machine the same fits were slower and erratic (threads waiting for busy cores); "
    "`--threads 0` measures that.",
]


def render(info: dict, args, rows: list[dict], wall: float, load_end) -> str:
    """The README section of a run."""
    lines = [
        "### Exact solvers: APGD and ADMM (issue 2)",
        "",
        provenance(info, load_end=load_end),
        "",
        f"Paper 000's setup (MATH.md §7): synthetic GP curves (linear variant) on {args.p_in}-point input and "
        f"m = {args.m} output grids, {100 * args.tau:g}% Type 2 outliers in the training curves, λ = {args.lam:g}, "
        f"κ = {args.kappa:g}, ε = {args.epsilon:g} (our units), Gaussian kernels γ_x = {args.gamma_x:g}, "
        f"γ_θ = {args.gamma_theta:g}; spline dual (D_s), both solvers warm-started from the closed form and stopped "
        f"at a relative duality gap of {args.tol:g}. The eigendecompositions of K_X and K_Θ are computed once per n "
        'and shared ("eig"): one fit costs "eig + solve". "Per iteration" is timed between the first and the '
        "last iteration. The floor is one product K_X V K_Θ, timed alone (median of repetitions just before and "
        "after each fit) and, for APGD, inside the solver loop (the products the solver computes, which run with "
        "colder caches). ADMM computes no such product: an iteration is three rotations U·Vᵀ (MATH.md §3.1b). "
        'The square loss is solved in closed form (0 iterations); "(cap)" marks a fit stopped at max_iter.',
        "",
        markdown(rows),
        "",
        *[f"- {s}" for s in summary(rows, args)],
        "",
        "Notes:",
        "",
        *[f"- {s}" for s in NOTES],
        "",
        f"Whole run {wall / 60:.1f} min.",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(p, quick_help="n in {100, 300}: a smoke run of a few seconds; does not touch the README")
    p.add_argument("--n", type=int, nargs="+", default=None, help="sample sizes (default 100 300 1000 3000)")
    p.add_argument("--m", type=int, default=100, help="grid size of the output curves (default 100)")
    p.add_argument("--p-in", type=int, default=100, help="grid size of the input curves (default 100)")
    p.add_argument("--losses", nargs="+", choices=list(LOSSES), default=list(LOSSES))
    p.add_argument("--solvers", nargs="+", choices=list(SOLVERS), default=list(SOLVERS))
    p.add_argument("--lam", type=float, default=1e-5)
    p.add_argument("--kappa", type=float, default=0.05)
    p.add_argument("--epsilon", type=float, default=0.1)
    p.add_argument("--gamma-x", type=float, default=0.01)
    p.add_argument("--gamma-theta", type=float, default=100.0)
    p.add_argument("--tau", type=float, default=0.1, help="fraction of Type 2 outliers (default 0.1)")
    p.add_argument("--tol", type=float, default=1e-6, help="relative duality gap (default 1e-6)")
    p.add_argument("--max-iter-apgd", type=int, default=20_000)
    p.add_argument("--max-iter-apgd-3000", type=int, default=1_000, help="APGD cap for n >= 3000 (default 1000)")
    p.add_argument("--max-iter-admm", type=int, default=2_000)
    p.add_argument("--repeat", type=int, default=20, help="repetitions of the floor timings (median)")
    p.add_argument("--repeat-fit", type=int, default=5, help="repetitions of the product before and after each fit")
    p.add_argument(
        "--render",
        type=Path,
        default=None,
        help="do not run: rebuild the README section from a results JSON written by an earlier run",
    )
    args = p.parse_args(argv)
    if args.render is not None:
        saved = json.loads(args.render.read_text())
        run_args = argparse.Namespace(**saved["args"])
        text = render(saved["info"], run_args, saved["rows"], saved["wall_seconds"], saved.get("load_end"))
        print(text)
        if not args.no_readme:
            write_section("exact-solvers", text, args.readme)
        return 0
    if args.n is None:
        args.n = [100, 300] if args.quick else [100, 300, 1000, 3000]
    if args.quick:
        args.repeat = min(args.repeat, 5)
        args.repeat_fit = min(args.repeat_fit, 3)
    if args.threads > 0:  # 0: leave BLAS at its default (one thread per core)
        limit_blas_threads(args.threads)
    info = machine_info(args.threads if args.threads > 0 else "default")
    print(provenance(info), flush=True)
    t0 = time.perf_counter()
    rows = []
    for n in args.n:
        rows.extend(bench_n(n, args))
    wall = time.perf_counter() - t0
    load_end = list(os.getloadavg())
    to_readme = not (args.no_readme or args.quick)
    save_json(
        "apgd" if to_readme else ("apgd_quick" if args.quick else "apgd_no_readme"),
        dict(
            info=info,
            args={k: v for k, v in vars(args).items() if k not in ("readme", "render")},
            rows=rows,
            wall_seconds=wall,
            load_end=load_end,
        ),
    )
    text = render(info, args, rows, wall, load_end)
    print()
    print(text)
    if to_readme:
        write_section("exact-solvers", text, args.readme)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
