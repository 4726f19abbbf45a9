"""Step cost of level sampling at m = 1,000 (issue 14): DSGD steps on the full grid against steps on s sampled
levels, for every integral loss, measured in the same run.

A doubly stochastic step (thesis 003 Algorithm 3.2, :class:`rffor.solvers.dsgd.LevelSampler`) computes the
minibatch's predictions, residuals and gradients at s levels only: its cost is ``2 b D_x D_θ`` (the products with
the input features, which no level sampling removes) plus ``O(b s D_θ)``, against ``2 b D_x D_θ + O(b m D_θ)`` on
the grid. The ratio therefore depends on D_x: this script times both at D_x = 200 and 1,000.

- functional outputs (square, H_κ^1, ℓ_ε^∞, pinball): nonlinear synthetic curves on m = 1,000 grid points
  (:func:`rffor.datasets.make_synthetic`), s grid columns per step;
- quantile functions (pinball): scalar targets (the sine toy) against the same targets expanded on 1,000 levels,
  s levels drawn from U[0, 1] per step and the output features evaluated off the grid.

Each configuration runs ``--steps`` steps of batch 256 from the same state, in float32, one BLAS thread,
interleaved over ``--repeats`` rounds (the best time of each is kept: the machine is shared). Writes the
``level-sampling`` block of benchmarks/README.md and benchmarks/results/level_sampling.json.

Usage::

    python benchmarks/level_sampling.py
    python benchmarks/level_sampling.py --quick
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    add_common_args,
    args_record,
    fmt,
    limit_blas_threads,
    machine_info,
    markdown_table,
    provenance,
    run_args,
    save_json,
    write_section,
)

from rffor.datasets import make_synthetic  # noqa: E402
from rffor.features import ExactOutputFactor, RandomFourierFeatures  # noqa: E402
from rffor.kernels import Gaussian  # noqa: E402
from rffor.levels import NormalOffset  # noqa: E402
from rffor.losses import EpsilonInsensitive, Huber, Pinball, Square  # noqa: E402
from rffor.solvers.dsgd import LevelSampler, SGDConfig, SGDState, sgd_steps  # noqa: E402

LOSSES = {
    "square": Square(),
    "H_κ^1 (κ=0.1)": Huber(0.1, 1),
    "ℓ_ε^∞ (ε=0.05)": EpsilonInsensitive(0.05, np.inf),
    "pinball": Pinball(),
}


def time_steps(cfg, Phi_x, Y, Phi_theta, B0, steps) -> float:
    state = SGDState.from_coef(B0, "float32")
    tic = time.perf_counter()
    sgd_steps(state, Phi_x, Y, Phi_theta, steps, cfg, np.random.default_rng(0))
    return (time.perf_counter() - tic) / steps


def report(records, info, argv, run) -> str:
    """The block; ``run``: the arguments the measuring run was given (:func:`_common.run_args`), not those of a
    ``--report-only`` invocation."""
    m = max(r["levels_per_step"] for r in records)
    rows = []
    for r in records:
        s = r["levels_per_step"]
        which = f"all m = {m}" if s == m else f"s = {s}"
        rows.append([r["loss"], r["D_x"], r["D_theta"], which, fmt(r["ms_per_step"]), f"{r['speedup']:.2f}x"])
    threads = info["blas_threads"] if info.get("blas_threads") is not None else run["threads"]
    return "\n".join([
        f"### Level sampling in DSGD steps at m = {m:,} (issue 14)", "", provenance(info, argv), "",
        f"Batch 256, float32, {threads} BLAS thread{'s' if threads != 1 else ''}, {run['steps']} steps from the same "
        f"state, best of {run['repeats']} "
        f"interleaved rounds. Grid columns: s of the m = {m:,} columns per step, shared by the minibatch "
        "(functional outputs, exact output factor of a Gaussian k_Θ with γ = 100). Quantile function: scalar "
        f"targets and s levels drawn from U[0, 1], against the same targets expanded on {m:,} midpoint levels "
        "(exact factor of γ = 10). The speed-up is the full grid's time per step over the sampled one's, in the "
        "same run. What remains of a sampled step is the 2·b·D_x·D_θ of the products with the input features, "
        f"hence the smaller gain at D_x = {max(r['D_x'] for r in records):,}.", "",
        markdown_table(["loss", "D_x", "D_θ", "levels per step", "ms per step", "speed-up"], rows),
    ])  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--m", type=int, default=1000)
    parser.add_argument("--samples", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--dx", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--report-only", action="store_true", help="rebuild the README block from the results")
    add_common_args(parser)
    args = parser.parse_args(argv)
    if args.report_only:
        import json

        from _common import RESULTS

        saved = json.loads((RESULTS / "level_sampling.json").read_text())
        run = run_args(saved, parser)
        write_section("level-sampling", report(saved["records"], saved["info"], saved["argv"], run), args.readme)
        return 0
    limit_blas_threads(args.threads)
    if args.quick:
        args.m, args.steps, args.repeats, args.dx = 200, 10, 1, [200]
    info = machine_info(args.threads)
    b, n = 256, 2048
    m = args.m
    syn = make_synthetic(n, 1, m=m, p_in=20, nonlinear=True, noise=0.05, random_state=args.seed)
    theta = syn.theta
    phi_t = ExactOutputFactor(Gaussian(100.0), theta, dtype=np.float32)
    Y_curves = syn.Y_train.astype(np.float32)
    # quantile functions: scalar targets, the same grid of levels (midpoints), the exact factor on it
    rng = np.random.default_rng(args.seed)
    x = rng.uniform(0, 1.5, n)
    y = -np.sin(2 * np.pi * x) * (1 + np.sin(2 * np.pi * x / 3)) + (0.2 + (1.5 - x) / 1.5) * rng.standard_normal(n)
    levels = (np.arange(m) + 0.5) / m
    offset = NormalOffset.fit(y)
    phi_q = ExactOutputFactor(Gaussian(10.0), levels, dtype=np.float32)
    Y_levels = (y[:, None] - offset(levels)[None, :]).astype(np.float32)
    y_scalar = y[:, None].astype(np.float32)
    records = []
    for dx in args.dx:
        phi_in = RandomFourierFeatures(Gaussian(0.05), dx, 20, seed=0)
        Phi_curves = phi_in.transform(syn.X_train)
        Phi_sine = RandomFourierFeatures(Gaussian(10.0), dx, 1, seed=0).transform(x[:, None])
        B_curves = np.random.default_rng(1).standard_normal((dx, phi_t.n_features)).astype(np.float32) * 1e-2
        B_sine = np.random.default_rng(1).standard_normal((dx, phi_q.n_features)).astype(np.float32) * 1e-2
        configs = []
        for name, loss in LOSSES.items():
            base = dict(lam=1e-4, batch_size=b, step_size=0.1, theta=theta)
            configs.append(
                (name, "grid", m, SGDConfig(loss, **base), Phi_curves, Y_curves, phi_t.grid_features, B_curves)
            )
            for s in args.samples:
                cfg = SGDConfig(loss, **base, sampler=LevelSampler(s, "grid"))
                configs.append((name, "grid", s, cfg, Phi_curves, Y_curves, phi_t.grid_features, B_curves))
        base = dict(lam=1e-4, batch_size=b, step_size=0.1)
        configs.append(("pinball, quantile function", "levels", m, SGDConfig(Pinball(), **base, theta=levels),
                        Phi_sine, Y_levels, phi_q.grid_features, B_sine))  # fmt: skip
        for s in args.samples:
            cfg = SGDConfig(Pinball(), **base, sampler=LevelSampler(s, "uniform", phi_q, offset))
            configs.append(("pinball, quantile function", "levels", s, cfg, Phi_sine, y_scalar, phi_q.grid_features,
                            B_sine))  # fmt: skip
        best = [np.inf] * len(configs)
        for _ in range(args.repeats):  # interleaved: every configuration sees the same load
            for k, (_, _, _, cfg, P, Y, Pt, B0) in enumerate(configs):
                best[k] = min(best[k], time_steps(cfg, P, Y, Pt, B0, args.steps))
        for k, (name, kind, s, *_rest) in enumerate(configs):
            full = next(best[j] for j, c in enumerate(configs) if c[0] == name and c[2] == m)
            rec = {"loss": name, "kind": kind, "D_x": dx, "D_theta": configs[k][6].shape[1], "levels_per_step": s,
                   "ms_per_step": 1e3 * best[k], "speedup": full / best[k]}  # fmt: skip
            records.append(rec)
            print(rec, flush=True)
    save_json(
        "level_sampling" + ("_quick" if args.quick else ""),
        {"info": info, "argv": sys.argv, "args": args_record(args), "records": records},
    )
    if not args.no_readme and not args.quick:
        write_section("level-sampling", report(records, info, sys.argv, args_record(args)), args.readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
