"""Train rffor on a SLURM cluster: dask-jobqueue submits the workers as SLURM jobs, this process is the driver.

    sbatch cluster/slurm/driver.sbatch                    # the driver as a small job of its own (recommended)
    python cluster/slurm/launch.py --data /shared/train.zarr --jobs 4 --checkpoint /shared/fit.ckpt

The driver runs the Dask scheduler and holds the model B; the SLURM jobs run the workers (``jobqueue.yaml``: one
single-threaded worker per core) and read their partitions of the Zarr store themselves, so the store must be on a
file system every node sees (or an object-store URL). After every round the driver writes a checkpoint; if the
driver job dies, submit it again: it resumes from the checkpoint and ends with the same model. Workers that die
(preemption, walltime) are replaced by dask-jobqueue and their tasks rerun elsewhere with the same result.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER_DIR = os.path.dirname(HERE)


def load_config() -> None:
    """cluster/dask.yaml and cluster/slurm/jobqueue.yaml over the packages' defaults; the user's Dask config
    (YAML files in the usual places, DASK_* variables) still wins."""
    import dask.config
    import dask_jobqueue  # noqa: F401 - its defaults first, so that ours replace them

    files = [os.path.join(CLUSTER_DIR, "dask.yaml"), os.path.join(HERE, "jobqueue.yaml")]
    dask.config.update(dask.config.config, dask.config.collect(paths=files, env={}), priority="new")
    dask.config.update(dask.config.config, dask.config.collect(), priority="new")
    os.environ.setdefault("RFFOR_CLUSTER_DIR", CLUSTER_DIR)


def make_cluster(jobs: int, **overrides):
    """A SLURMCluster from the jobqueue config (overrides: any SLURMCluster argument) scaled to ``jobs`` jobs."""
    from dask_jobqueue import SLURMCluster

    cluster = SLURMCluster(**overrides)
    cluster.scale(jobs=jobs)
    return cluster


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, help="Zarr store every node can read (path or URL)")
    parser.add_argument("--jobs", type=int, default=2, help="SLURM worker jobs (default 2)")
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="P (default: all worker threads of --jobs jobs; fixed so the model does not depend "
        "on how many jobs have started)",
    )
    parser.add_argument("--epochs", type=float, default=10.0)
    parser.add_argument("--n-features-x", type=int, default=2000)
    parser.add_argument("--checkpoint", default=None, help="checkpoint on shared storage (resumed if present)")
    parser.add_argument("--out", default="model.rffor", help="where to save the fitted model")
    parser.add_argument("--print-job-script", action="store_true", help="show the worker job script and exit")
    args = parser.parse_args(argv)

    load_config()
    import dask.config
    from distributed import Client

    import rffor.data
    from rffor import FunctionalRegressor
    from rffor.kernels import Gaussian
    from rffor.losses import Huber

    cluster = make_cluster(0 if args.print_job_script else args.jobs)
    with cluster, Client(cluster, set_as_default=False) as client:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        per_job = int(dask.config.get("jobqueue.slurm.processes") or 1)
        n_workers = args.jobs * per_job
        print(f"waiting for {n_workers} workers ({args.jobs} SLURM jobs)...", flush=True)
        tic = time.perf_counter()
        client.wait_for_workers(n_workers, timeout=24 * 3600)
        print(f"{n_workers} workers after {time.perf_counter() - tic:.0f} s", flush=True)
        est = FunctionalRegressor(
            Huber(kappa=0.1, p=1),
            kernel_x=Gaussian(gamma=0.02),
            kernel_theta=Gaussian(gamma=100.0),
            lam=1e-5,
            solver="rff",
            n_features_x=args.n_features_x,
            n_epochs=args.epochs,
            n_partitions=args.partitions or n_workers,
            client=client,
            checkpoint=args.checkpoint,
            resume=args.checkpoint is not None,
            random_state=0,
            verbose=1,
        )
        est.fit(rffor.data.open(args.data))
        print(f"saved {est.save(args.out)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
