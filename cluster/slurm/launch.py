"""Train rffor on a SLURM cluster: dask-jobqueue submits the workers as SLURM jobs, this process is the driver.

    sbatch cluster/slurm/driver.sbatch /shared/train.zarr 4            # the driver as a small job of its own
    python cluster/slurm/launch.py --data /shared/train.zarr --jobs 4 --checkpoint /shared/fit.ckpt

The driver runs the Dask scheduler and holds the model B; every SLURM job is one node running one Dask worker with a
thread per core (``jobqueue.yaml``), and reads its partitions of the Zarr store itself, so the store must be on a
file system every node sees (or an object-store URL). The fit is the default route for the Huber loss: the
square-loss closed form as a warm start, then full-batch majorize-minimize passes, one partition per node
(``partitions_per="worker"``: a node's threads share its chunks; P = the jobs). Every pass's partial results merge
on the workers by a fixed tree; the driver receives one result per pass. ``--method sgd`` trains by rounds of local
SGD instead, one partition (a chain of steps) per core, split_every of them per task on a node's threads. After
every pass the driver writes a checkpoint; if the driver
job dies, submit it again: it resumes from the checkpoint and ends with the same model. Workers that die
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
    parser.add_argument("--jobs", type=int, default=2, help="SLURM worker jobs, one node each (default 2)")
    parser.add_argument(
        "--partitions",
        type=int,
        default=None,
        help="P (default: the jobs, or their cores with --method sgd; fixed so that the model does not depend on "
        "how many jobs have started)",
    )
    parser.add_argument("--method", default="auto", choices=["auto", "mm", "sgd"], help="auto: MM passes (Huber)")
    parser.add_argument("--epochs", type=float, default=10.0, help="--method sgd: passes over the data")
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

    sgd = args.method == "sgd"
    cores = int(dask.config.get("jobqueue.slurm.cores") or 1)
    cluster = make_cluster(0 if args.print_job_script else args.jobs)
    with cluster, Client(cluster, set_as_default=False) as client:
        if args.print_job_script:
            print(cluster.job_script())
            return 0
        n_workers = args.jobs * int(dask.config.get("jobqueue.slurm.processes") or 1)
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
            rff_method=args.method,
            n_features_x=args.n_features_x,
            n_epochs=args.epochs,
            # DSGD: a chain of steps per core (a partition is one sequential chain); otherwise one per node
            n_partitions=args.partitions or (args.jobs * cores if sgd else args.jobs),
            partitions_per="thread" if sgd else "worker",
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
