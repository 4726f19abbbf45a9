"""Checksums of fitted models over a fixed table of configurations: the bits a redesign must not change.

Every configuration goes through the public estimators only (so that the script runs unchanged before and after
a change of the code's shape) on small synthetic data with a fixed ``random_state``, with one BLAS thread in this
process (Dask's Nanny workers have one too). For each fit it prints the first 16 hex digits of the SHA-256 of
``coef_`` (random features) or ``dual_coef_`` (exact solvers), as float64 C-contiguous bytes, and the seconds it
took. Two runs on the same machine and packages print the same table; a change of the library that changes any
bit of any fit changes a line.

Configurations: exact ADMM and APGD (splines and eigen); random-feature closed form; MM (Huber p = 2,
ε-insensitive p = 2); DSGD rounds with averaging on an embedded LocalCluster (P = 2); ``lam="auto"`` with
``loss_params="auto"`` and ``kernel_theta_params="auto"``; quantile functions (exact ADMM with the non-crossing
penalty, random features by level-sampled DSGD); an MM fit stopped after its third checkpoint and resumed.

Usage::

    python benchmarks/fit_checksums.py [--only NAME ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits


def digest(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(np.asarray(a, dtype=np.float64)).tobytes()).hexdigest()[:16]


def _curves(n, m=20, seed=0, outliers=0.1):
    from rffor.datasets import add_outliers, make_synthetic

    data = make_synthetic(n, 10, m=m, p_in=20, nonlinear=True, noise=0.02, random_state=seed)
    Y, _ = add_outliers(data.Y_train, 2, outliers, random_state=seed + 1)
    return data.X_train, Y, data.theta


def configurations():
    from rffor import FunctionalRegressor, QuantileFunctionRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import EpsilonInsensitive, Huber, Pinball, Square

    small = _curves(80)
    large = _curves(3000, seed=5)
    kx, kt = Gaussian(gamma=0.05), Gaussian(gamma=100.0)

    def exact(solver, representation, loss):
        def run():
            est = FunctionalRegressor(
                loss, kernel_x=kx, kernel_theta=kt, lam=1e-4, solver=solver, representation=representation,
                n_eig=8 if representation == "eigen" else None, random_state=0,
            )  # fmt: skip
            return est.fit(*small[:2], theta=small[2]).dual_coef_

        return run

    def rff(loss, **kw):
        def run():
            params = dict(kernel_x=kx, kernel_theta=kt, lam=1e-6, solver="rff", n_features_x=200, random_state=0)
            est = FunctionalRegressor(loss, **{**params, **kw})
            return est.fit(*large[:2], theta=large[2]).coef_

        return run

    def resumed():
        import rffor.checkpoint as ckpt

        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "fit.ckpt")
            params = dict(
                kernel_x=kx, kernel_theta=kt, lam=1e-6, solver="rff", n_features_x=200, random_state=0,
                checkpoint=path, tol=1e-9,
            )  # fmt: skip
            save, calls = ckpt.save, []

            def save_then_stop(*args, **kwargs):
                save(*args, **kwargs)
                calls.append(1)
                if len(calls) == 3:
                    raise KeyboardInterrupt

            ckpt.save = save_then_stop
            try:
                FunctionalRegressor(Huber(kappa=0.05, p=2), **params).fit(*large[:2], theta=large[2])
            except KeyboardInterrupt:
                pass
            finally:
                ckpt.save = save
            if len(calls) != 3:
                raise RuntimeError("the fit ended before its third checkpoint")
            est = FunctionalRegressor(Huber(kappa=0.05, p=2), resume=True, **params)
            return est.fit(*large[:2], theta=large[2]).coef_

    rng = np.random.default_rng(3)
    Xq = rng.uniform(0, 1, (300, 2))
    yq = np.sin(5 * Xq[:, 0]) + Xq[:, 1] + 0.3 * rng.standard_normal(300)

    def quantile_exact():
        est = QuantileFunctionRegressor(levels=15, kernel_x=Gaussian(gamma=2.0), lam=1e-3, noncrossing=1.0,
                                        solver="admm")  # fmt: skip
        return est.fit(Xq[:120], yq[:120]).dual_coef_

    def quantile_rff():
        est = QuantileFunctionRegressor(
            Pinball(), levels=20, kernel_x=Gaussian(gamma=2.0), lam=1e-4, solver="rff", n_features_x=100,
            n_epochs=3, random_state=0,
        )  # fmt: skip
        return est.fit(Xq, yq).coef_

    return {
        "admm-splines-huber2": exact("admm", "splines", Huber(kappa=0.2, p=2)),
        "admm-eigen-eps2": exact("admm", "eigen", EpsilonInsensitive(epsilon=0.1, p=2)),
        "apgd-splines-huber1": exact("apgd", "splines", Huber(kappa=0.1, p=1)),
        "apgd-eigen-huber2": exact("apgd", "eigen", Huber(kappa=0.2, p=2)),
        "rff-closed-form-square": rff(Square()),
        "rff-mm-huber2": rff(Huber(kappa=0.05, p=2), tol=1e-9),
        "rff-mm-eps2": rff(EpsilonInsensitive(epsilon=0.05, p=2)),
        "rff-dsgd-rounds-P2": rff(
            Huber(kappa=0.05, p=2), rff_method="sgd", n_epochs=2, local_steps=3, n_partitions=2, batch_size=64
        ),
        "rff-auto-lam-kappa-gamma": rff(
            Huber(kappa=0.05, p=2), lam="auto", loss_params="auto", kernel_theta_params="auto", n_features_x=100
        ),
        "rff-auto-lam-square": rff(Square(), lam="auto", n_features_x=100),
        "quantile-exact-noncrossing": quantile_exact,
        "quantile-rff-dsgd": quantile_rff,
        "rff-mm-huber2-resumed": resumed,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="configurations to run (default all)")
    parser.add_argument("--json", help="also write the table to this JSON file")
    args = parser.parse_args(argv)
    table = {}
    if __name__ == "__main__":  # Dask's worker processes re-import this file: build the table here only
        configs = configurations()
        names = args.only or list(configs)
        unknown = sorted(set(names) - set(configs))
        if unknown:
            parser.error(f"unknown configurations {unknown}; known: {sorted(configs)}")
        with threadpool_limits(limits=1, user_api="blas"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name in names:
                tic = time.perf_counter()
                table[name] = digest(configs[name]())
                print(f"{name:28s} {table[name]}  ({time.perf_counter() - tic:.1f} s)", flush=True)
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(table, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
