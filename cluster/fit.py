"""Fit rffor on a running Dask cluster: the trainer of cluster/local/run.sh, docker/ and kubernetes/.

    python cluster/fit.py --scheduler-file scheduler.json --data train.zarr [--n 200000] [--partitions-per worker]

Makes a synthetic nonlinear function-to-function data set in a Zarr store if ``--data`` does not exist yet (the
store must be readable by every worker: a shared path or an s3:// / gs:// URL), fits a FunctionalRegressor with the
Huber loss on the cluster by the default route for it, full-batch majorize-minimize passes from the closed form
(``--method sgd``: rounds of local SGD instead), and prints the passes, the time and the test R².

``--partitions-per worker`` is the layout for workers of many threads (one per node, ``dask worker --nthreads
CORES``): one partition per worker, whose chunks its threads share; P defaults to the number of workers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--scheduler-file", help="JSON file written by `dask scheduler --scheduler-file`")
    where.add_argument("--scheduler-address", help="tcp://host:port or tls://host:port")
    parser.add_argument("--data", required=True, help="Zarr store (path or fsspec URL); created if missing")
    parser.add_argument("--n", type=int, default=200_000, help="curves to generate (default 200000)")
    parser.add_argument("--m", type=int, default=100, help="grid points per curve (default 100)")
    parser.add_argument("--chunk-rows", type=int, default=None, help="rows per chunk of a new store (default ~8 MB)")
    parser.add_argument(
        "--method", default="auto", choices=["auto", "mm", "sgd"], help="auto: MM passes for the Huber loss; sgd: DSGD"
    )
    parser.add_argument("--epochs", type=float, default=3.0, help="--method sgd: passes over the data")
    parser.add_argument("--n-features-x", type=int, default=1000)
    parser.add_argument(
        "--partitions", type=int, default=None, help="P (default: the worker threads; --partitions-per worker: workers)"
    )
    parser.add_argument(
        "--partitions-per",
        default="thread",
        choices=["thread", "worker"],
        help="one partition per worker thread (default) or per worker (workers of many threads, one per node)",
    )
    parser.add_argument("--workers", type=int, default=0, help="wait until this many workers are connected")
    parser.add_argument("--checkpoint", default=None, help="checkpoint path (resumed if it exists)")
    parser.add_argument("--out", default=None, help="save the fitted model here (rffor.load reads it back)")
    parser.add_argument("--tls-dir", default=None, help="directory with ca.pem, cert.pem, key.pem (tls:// only)")
    parser.add_argument("--timeout", default="60s", help="how long to wait for the scheduler (default 60s)")
    args = parser.parse_args(argv)

    import dask

    import rffor.data
    from rffor import FunctionalRegressor
    from rffor.datasets import make_synthetic
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    address = args.scheduler_address
    if args.scheduler_file:
        with open(args.scheduler_file) as f:
            address = json.load(f)["address"]
    security = None
    if args.tls_dir:
        from distributed.security import Security

        security = Security(
            tls_ca_file=os.path.join(args.tls_dir, "ca.pem"),
            tls_client_cert=os.path.join(args.tls_dir, "cert.pem"),
            tls_client_key=os.path.join(args.tls_dir, "key.pem"),
            require_encryption=True,
        )

    test = make_synthetic(10, 2000, m=args.m, p_in=50, nonlinear=True, random_state=1)
    try:
        ds = rffor.data.open(args.data)
        print(f"using {ds!r}", flush=True)
    except FileNotFoundError:
        tic = time.perf_counter()
        train = make_synthetic(args.n, 0, m=args.m, p_in=50, nonlinear=True, noise=0.05, random_state=1)
        ds = rffor.data.write(args.data, train.X_train, train.Y_train, train.theta, chunks=args.chunk_rows)
        print(f"wrote {ds!r} in {time.perf_counter() - tic:.1f} s", flush=True)

    est = FunctionalRegressor(
        Huber(kappa=0.1, p=1),
        kernel_x=Gaussian(gamma=0.02),
        kernel_theta=Gaussian(gamma=100.0),
        lam=1e-5,
        solver="rff",
        n_features_x=args.n_features_x,
        rff_method=args.method,
        n_epochs=args.epochs,
        n_partitions=args.partitions,
        partitions_per=args.partitions_per,
        scheduler_address=address,
        security=security,
        checkpoint=args.checkpoint,
        resume=args.checkpoint is not None,
        random_state=0,
        verbose=1,
    )
    with dask.config.set({"rffor.connect-timeout": args.timeout}):
        if args.workers:
            from distributed import Client

            with Client(address, security=security, timeout=args.timeout, set_as_default=False) as client:
                print(f"waiting for {args.workers} worker(s) on {address}", flush=True)
                client.wait_for_workers(args.workers, timeout=dask.utils.parse_timedelta(args.timeout) * 10)
        tic = time.perf_counter()
        est.fit(ds)
        seconds = time.perf_counter() - tic
    passes = [h for h in est.rff_history_ if h["round"] >= 0]
    unit = "rounds of local SGD" if args.method == "sgd" else "MM passes over all curves"
    print(
        f"fit: {len(passes)} {unit} after the closed-form warm start, {seconds:.1f} s in all "
        f"({sum(h['seconds'] for h in passes):.1f} s in those); test R² = {est.score(test.X_test, test.Y_test):.4f}",
        flush=True,
    )
    if args.out:
        print(f"saved the model to {est.save(args.out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
