"""Preconditioned DSGD (``precondition_rank``): accuracy at small λ against plain DSGD and the exact solver, and its
cost per sample.

    python benchmarks/preconditioning.py            # about 5 minutes on 2 cores
    python benchmarks/preconditioning.py --quick    # under a minute

Setting of the robustness benchmark where plain DSGD fell short (benchmarks/README.md, "Robustness"): nonlinear
synthetic curves (m = 100, noise 0.05), 20% Type 2 outliers in the training curves, H_κ^2 with κ = 0.03 and
λ = 1e-6, Gaussian kernels γ_X = 0.01, γ_Θ = 100. For each n: the exact solver (ADMM, relative gap 1e-6) and the
random-feature solver (D_x = 1000, exact output factor, warm start from the square-loss closed form, DSGD with
batch 16 for n = 100 and 256 above, the same epochs) with plain and preconditioned steps of several ranks, and
fit_rff's default (the reweighted warm start of ``init_reweight`` then preconditioned steps, k = 50). Reported:
clean test NMSE, training objective J of (P_rf) relative to the best J of the row's random-feature fits, fit time.
Then the cost: DSGD samples/s with D_x = 2000 (d = 50, m = 100, batch 256) for each rank, as a ratio to plain DSGD
in the same run. Results go to ``benchmarks/results/preconditioning[_quick].json`` and the "preconditioning" block
of ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    add_common_args,
    limit_blas_threads,
    machine_info,
    markdown_table,
    nmse,
    provenance,
    save_json,
    write_section,
)

from rffor import FunctionalRegressor  # noqa: E402
from rffor.chunked import ArrayData  # noqa: E402
from rffor.datasets import add_outliers, make_synthetic  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.losses import Huber  # noqa: E402
from rffor.solvers import rff  # noqa: E402

LAM, KAPPA = 1e-6, 0.03


def accuracy_row(n: int, ranks: list[int], epochs: float, seed: int) -> dict:
    data = make_synthetic(n, 500, m=100, nonlinear=True, noise=0.05, random_state=seed)
    Y, _ = add_outliers(data.Y_train, 2, 0.2, random_state=seed + 1)
    common = dict(kernel_x=Gaussian(gamma=0.01), kernel_theta=Gaussian(gamma=100.0), lam=LAM, random_state=seed)
    loss = Huber(kappa=KAPPA, p=2)
    row: dict = {"n": n, "epochs": epochs, "fits": {}}
    tic = time.perf_counter()
    exact = FunctionalRegressor(loss, solver="admm", **common).fit(data.X_train, Y, data.theta)
    row["fits"]["exact (ADMM)"] = {
        "nmse": nmse(data.Y_test, exact.predict(data.X_test)),
        "seconds": time.perf_counter() - tic,
    }
    arr = ArrayData(data.X_train, Y, data.theta)
    batch = 16 if n <= 200 else 256
    objectives = {}
    # the square-loss start (init_reweight=0) isolates the steps; the last fit is fit_rff's default
    for rank, reweight in [(0, 0), *((r, 0) for r in ranks), (50, 10)]:
        tic = time.perf_counter()
        res = rff.fit_rff(
            arr,
            loss=loss,
            n_features_x=1000,
            batch_size=batch,
            n_epochs=epochs,
            precondition_rank=rank,
            init_reweight=reweight,
            rff_method="sgd",  # the preconditioned DSGD steps are what this study measures
            **common,
        )
        seconds = time.perf_counter() - tic
        if reweight:
            name = f"rff, default: reweighted start + preconditioned k = {rank}"
        else:
            name = "rff, plain DSGD" if rank == 0 else f"rff, preconditioned k = {rank}"
        Phi_t = res.output_features.transform(data.theta)
        objectives[name] = rff.objective(arr, res.coef, res.input_features, Phi_t, loss, LAM)
        row["fits"][name] = {"nmse": nmse(data.Y_test, res.predict(data.X_test)), "seconds": seconds}
    best = min(objectives.values())
    for name, J in objectives.items():
        row["fits"][name]["J"] = J
        row["fits"][name]["J_rel"] = J / best - 1.0
    row["batch"] = batch
    return row


def throughput(ranks: list[int], n: int, seed: int, repeats: int) -> dict:
    data = make_synthetic(n, 0, m=100, p_in=50, nonlinear=True, noise=0.05, random_state=seed)
    arr = ArrayData(data.X_train, data.Y_train, data.theta, chunk_rows=10_000)
    kw = dict(
        loss=Huber(kappa=0.1, p=2),
        kernel_x=Gaussian(gamma=0.02),
        kernel_theta=Gaussian(gamma=100.0),
        lam=1e-5,
        n_features_x=2000,
        batch_size=256,
        n_epochs=1,
        rff_method="sgd",
        random_state=seed,
    )
    rates: dict[int, list[float]] = {r: [] for r in [0, *ranks]}
    for _ in range(repeats):  # interleaved: every rank sees the same load
        for rank in rates:
            res = rff.fit_rff(arr, precondition_rank=rank, **kw)
            rounds = [h for h in res.history if h["round"] >= 0]
            samples = sum(h["steps"] for h in rounds) * 256
            rates[rank].append(samples / sum(h["seconds"] for h in rounds))
    best = {r: max(v) for r, v in rates.items()}
    return {"n": n, "rates": rates, "best": best, "ratio": {r: best[r] / best[0] for r in best}}


def render(res: dict, info: dict, argv) -> str:
    lines = ["### Preconditioned DSGD at small λ: `benchmarks/preconditioning.py`", "", provenance(info, argv), ""]
    lines.append(
        f"Nonlinear synthetic curves, m = 100, 20% Type 2 outliers, H_κ^2 (κ = {KAPPA}), λ = {LAM:g}; 500 clean test "
        "curves. rff: D_x = 1000, exact output factor, warm start from the square-loss closed form "
        "(`init_reweight=0`, to isolate the steps) except the last row, fit_rff's default (square-loss closed "
        "form refined by reweighted closed forms, `init_reweight=10`), same epochs for every fit; "
        "J relative = J / (best J of the row's rff fits) − 1."
    )
    for row in res["accuracy"]:
        lines += [
            "",
            f"**n = {row['n']}** ({row['epochs']:g} epochs, batch {row['batch']})",
            "",
            markdown_table(
                ["fit", "test NMSE", "J relative", "fit (s)"],
                [
                    [
                        name,
                        f"{f['nmse']:.4g}",
                        "—" if "J_rel" not in f else f"{f['J_rel']:.3g}",
                        f"{f['seconds']:.1f}",
                    ]
                    for name, f in row["fits"].items()
                ],
            ),
        ]
    t = res["throughput"]
    lines += [
        "",
        f"Cost per sample: DSGD over {t['n']:,} curves (d = 50, m = 100, D_x = 2000, batch 256, float32), best of "
        "interleaved repeats:",
        "",
        markdown_table(
            ["rank k", "samples/s", "vs plain"],
            [[("plain" if r == 0 else r), f"{t['best'][r]:,.0f}", f"{t['ratio'][r]:.2f}"] for r in t["best"]],
        ),
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser)
    args = parser.parse_args(argv)
    limit_blas_threads(args.threads)
    info = machine_info(args.threads)
    warnings.simplefilter("ignore")
    sizes = [(100, 100.0)] if args.quick else [(100, 100.0), (2000, 30.0)]
    ranks = [50, 200] if args.quick else [20, 50, 100, 200]
    res: dict = {"machine": info, "accuracy": []}
    for n, epochs in sizes:
        row = accuracy_row(n, ranks, epochs, args.seed)
        res["accuracy"].append(row)
        print(f"n = {n}: " + ", ".join(f"{k}: {v['nmse']:.4g}" for k, v in row["fits"].items()), flush=True)
    res["throughput"] = throughput(ranks, 20_000 if args.quick else 60_000, args.seed, 2 if args.quick else 3)
    print("throughput ratio:", res["throughput"]["ratio"], flush=True)
    argv_list = ["benchmarks/preconditioning.py", *(sys.argv[1:] if argv is None else argv)]
    save_json("preconditioning_quick" if args.quick else "preconditioning", res)
    body = render(res, info, argv_list)
    print(body)
    if not (args.no_readme or args.quick):  # a smoke run never replaces the published tables
        write_section("preconditioning", body, args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
