"""The random-feature fit (MATH.md §5): settings → session → problem → [selection] → route.

:func:`fit_rff` is an ordinary driver function; every pass over the training data is a task per partition run by an
executor session (:mod:`rffor.executor`: in process, or on Dask where the data is), and the driver only combines
small matrices:

1. **settings** (:class:`rffor.settings.RFSettings`): validated once, resolved for the loss (the route, the input
   features, the dtype);
2. **session**: the executor opens the data split into P partitions of whole chunks; a checkpoint to resume from is
   checked against the fit's fingerprint;
3. **problem** (:class:`~rffor.solvers.problem.RFProblem`): φ_X built once (random Fourier features regenerated from
   their seed wherever used, or Nyström features of centres read from the data by the partition tasks), the output
   space's factor Φ_Θ of k_Θ, both shared with the tasks once;
4. **selection** with ``lam="auto"`` (:mod:`rffor.solvers.selection`): λ, κ/ε and γ_Θ on held-out curves, every
   candidate fitted where the data is; the problem then has the selected values and the route starts from the
   selected candidate;
5. **route** (:mod:`rffor.solvers.routes`): the square loss's one-pass closed form, MM passes for the other losses,
   or DSGD rounds with periodic averaging (``rff_method="sgd"``, or levels drawn from μ).

Because partitions and seeds, not workers, define the computation and results are combined in partition order, the
serial executor and a Dask cluster give the same bits for the same P, as do a pass rerun after a lost worker and a
fit resumed from its checkpoint (given one BLAS thread per process, as Dask's Nanny workers have).
"""

from __future__ import annotations

import os
import time
import uuid

from .. import checkpoint as ckpt_io
from .._validation import check_seed
from ..chunked import RowSplit, as_data, spread_chunks
from ..executor import SchedulerLostError, SerialExecutor
from ..kernels import MEDIAN_HEURISTIC_ROWS, Kernel, median_heuristic
from ..losses import Loss, Square
from ..outputs import CurveGrid
from ..progress import Progress
from ..settings import AUTO_FEATURES_PER_SQRT_N, AUTO_MIN_FEATURES, RFSettings
from .feature_cache import release_task
from .fit_log import FitLog
from .maps import FitMaps, make_input_features, make_output_map, sample_centres, share_output_side
from .problem import RFProblem, Start
from .result import RFFResult
from .routes import ROUTES, route_for
from .selection import select_hyperparameters
from .sums import problem_sums, sample_session

__all__ = ["fit_rff", "RFFResult"]


def fit_rff(
    data,
    *,
    loss: Loss | None = None,
    kernel_x: Kernel | None = None,
    kernel_theta: Kernel | None = None,
    outputs=None,
    settings: RFSettings | None = None,
    random_state=None,
    executor=None,
    checkpoint=None,
    resume: bool = False,
    verbose: int = 0,
    **options,
) -> RFFResult:
    """Fit the random-feature model (P_rf) of MATH.md §5 (the module docstring gives the path).

    Parameters
    ----------
    data : chunked dataset (:mod:`rffor.chunked`) or a tuple ``(X, Y[, theta])`` of shapes (n, d), (n, m), (m,)
    loss : Loss, default Square()
    kernel_x, kernel_theta : Kernel or None
        k_X (None: the median heuristic's on 1000 rows drawn by the partition tasks) and k_Θ (None: the output
        space's default).
    outputs : OutputSpace, optional
        The kind of output (:mod:`rffor.outputs`; default curves on the data's grid).
    settings : RFSettings, optional
        The fit's options (:mod:`rffor.settings`); ``**options`` replace some of them.
    random_state : int, Generator or None
    executor : executor, optional (:mod:`rffor.executor`; default: the passes run in this process)
    checkpoint, resume : path or None, bool
        Written atomically after every round or pass (:mod:`rffor.checkpoint`); ``resume`` continues from it after
        checking it belongs to this fit, to the bits of the uninterrupted fit.
    verbose : int (> 0: what each phase does where, on how many rows, and per-round progress, on stderr)

    Returns
    -------
    RFFResult

    Raises
    ------
    rffor.executor.SchedulerLostError
        The Dask scheduler was lost: the message says which round the checkpoint holds and how to resume.
    """
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint= (the path of the checkpoint to continue from)")
    data, space, settings, loss, kernel_theta = _prepare(data, outputs, settings, options, loss, kernel_theta)
    progress = Progress(verbose)
    saved = ckpt_io.load(checkpoint) if resume and os.path.exists(os.fspath(checkpoint)) else None
    rs = _seed(saved, random_state)
    executor = SerialExecutor() if executor is None else executor
    if hasattr(executor, "progress") and executor.progress is None:
        executor.progress = progress
    P_asked = settings.n_partitions or (saved.info.get("n_partitions") if saved is not None else None)
    try:
        with executor.open(
            data, P_asked, split_every=settings.split_every, partitions_per=settings.partitions_per
        ) as run:
            P = int(P_asked or len(run.partitions))
            model = {"loss": loss, "kernel_x": kernel_x, "kernel_theta": kernel_theta, "outputs": space}
            fingerprint = ckpt_io.fingerprint(data, {**settings.fingerprint(), **model}, P, rs)
            if saved is not None:
                ckpt_io.verify(saved, fingerprint, checkpoint)
            route = route_for(settings, loss, resumed=saved is not None)
            history = [] if saved is None else list(saved.history)
            info = {"random_state": rs, "n_partitions": P, "fingerprint": fingerprint}
            log = FitLog(checkpoint, info, progress, history, unit="round" if route == "sgd" else "pass")
            where = f"{data.n} curves in {data.n_chunks} chunk(s), P = {P} partition(s)"
            log.message(f"random-feature fit on {run.description}: {where}")
            problem = _problem(run, data, settings, space, loss, kernel_x, kernel_theta, rs, log)
            try:
                problem, start, selection = _select(run, problem, saved, log)
                result = ROUTES[route](run, problem, start, log)
            except SchedulerLostError as exc:
                raise log.lost_scheduler(exc) from exc
            result.path = selection
            if settings.feature_cache > 0:  # the workers drop this fit's features (memory for what comes next)
                run.map(release_task, problem.maps, label="release the feature cache")
            return result
    finally:
        progress.close()


def _prepare(data, outputs, settings, options, loss, kernel_theta):
    """Everything checked before any work: the settings (with ``options``), the loss, the data and its output
    space, k_Θ; returns them resolved."""
    settings = (settings or RFSettings()).replace(**options) if options else (settings or RFSettings())
    loss = Square() if loss is None else loss
    if not isinstance(loss, Loss):
        raise TypeError(f"loss must be an rffor.losses.Loss, got {loss!r}")
    data = as_data(data)
    space = CurveGrid(data.theta) if outputs is None else outputs
    kernel_theta = space.default_kernel() if kernel_theta is None else kernel_theta
    settings.check_model(loss, kernel_theta)
    if settings.level_sampling not in (None, "grid") and not space.scalar_targets:
        raise ValueError(
            "level_sampling draws levels anywhere in [0, 1]: the outputs must be scalar targets seen on a grid "
            "(outputs=rffor.outputs.QuantileLevels)"
        )
    # the loss as the space averages rows with missing outputs (over their observed entries, or over all m)
    return space.view(data), space, settings.resolved(loss), space.masked_loss(loss), kernel_theta


def _seed(saved, random_state) -> int:
    """The fit's random state: the checkpoint's when resuming (a different one given is refused)."""
    if saved is None:
        return check_seed(random_state)
    rs = int(saved.info.get("random_state"))
    if random_state is not None and not (isinstance(random_state, int) and int(random_state) == rs):
        raise ValueError(
            f"random_state={random_state!r} differs from the checkpoint's random_state={rs}; pass "
            f"random_state={rs} (or None) to resume, or resume=False to start over"
        )
    return rs


def _problem(run, data, settings, space, loss, kernel_x, kernel_theta, rs, log) -> RFProblem:
    """The maps of the fit, built once and shared with the session: k_X (the median heuristic's when None), φ_X
    (Nyström centres read by the partition tasks), the output side of k_Θ."""
    if kernel_x is None:
        tic = time.perf_counter()
        rows = sample_centres(run, data, MEDIAN_HEURISTIC_ROWS, (rs, 3))
        kernel_x = median_heuristic(rows)
        log.message(
            f"k_X: {kernel_x!r} by the median heuristic on {len(rows)} rows drawn uniformly from the {data.n} rows "
            f"({time.perf_counter() - tic:.1f} s)"
        )
    if settings.n_features_x == "auto":  # M grows with n (RFSettings.n_features_for); the problem holds the number
        settings = settings.replace(n_features_x=settings.n_features_for(data.n))
        log.message(
            f"n_features_x='auto': D_x = {settings.n_features_x} for {data.n} curves (⌈{AUTO_FEATURES_PER_SQRT_N:g}√n⌉ "
            f"within [{AUTO_MIN_FEATURES}, max_features_x = {settings.max_features_x}] and n)"
        )
    centres = None
    if settings.input_features == "nystrom":
        tic = time.perf_counter()
        centres = sample_centres(run, data, settings.n_features_x, (rs, 2))
        log.message(
            f"Nyström: {len(centres)} centres drawn uniformly from the {data.n} rows, read by the partition tasks "
            f"({time.perf_counter() - tic:.1f} s)"
        )
    phi_x = make_input_features(
        data.d, rs, kernel_x=kernel_x, n_features_x=settings.n_features_x, input_features=settings.input_features,
        centres=centres, dtype=settings.dtype,
    )  # fmt: skip
    output = make_output_map(space, kernel_theta, settings, rs)
    # a fresh cache key per fit: the first block a process computes under it drops the previous fit's
    fit_maps = FitMaps(phi_x, output.Phi_theta, uuid.uuid4().hex, settings.feature_cache, space)
    route = route_for(settings, loss)
    split = RowSplit(settings.holdout, True) if settings.lam == "auto" else None
    return RFProblem(
        data=data, settings=settings, space=space, loss=loss, lam=settings.lam, input_features=phi_x,
        output=output, maps=run.share(fit_maps), fit_maps=fit_maps, random_state=rs, kernel_x=kernel_x,
        split=split, metric_chunks=spread_chunks(data, settings.warm_rows(data.n, route)),
    )  # fmt: skip


def _select(run, problem: RFProblem, saved, log: FitLog):
    """With ``lam="auto"``: the selection (or, resuming, the checkpoint's choices) and the refit's problem and
    start; otherwise the problem as it is. Returns ``(problem, start, selection or None)``."""
    s, data = problem.settings, problem.data
    start = Start()
    if saved is not None:
        start = Start(state=saved.state, first=saved.round + 1)
        log.message(f"resuming from {str(log.checkpoint)!r} after {log.unit} {saved.round + 1}")
    if s.lam != "auto":
        return problem, start, None
    cap = s.selection_rows
    chunks = None if cap is None or data.n <= cap else spread_chunks(data, cap)
    if not problem.loss.is_square:
        # the MM metric of the fit on all rows: the covariance of the selection's rows (all rows, or a sample spread
        # over the data: MMRun doubles the metric where it fails to bound J), which is what the uninterrupted fit
        # uses and so what a resumed fit must compute too
        problem = problem.replace(metric_chunks=chunks)
    sel = None
    if saved is not None:
        info, loss, output, maps = saved.info, problem.loss, problem.output, problem.maps
        if info.get("loss_param") is not None:
            loss = loss.with_param(info["loss_param"])
        kernel = output.kernel
        if info.get("gamma_theta") is not None and float(info["gamma_theta"]) != float(
            getattr(kernel, kernel.param_name)
        ):
            output, maps = share_output_side(run, problem, kernel.with_param(float(info["gamma_theta"])))
        problem = problem.replace(lam=float(info["lam"]), loss=loss, output=output, maps=maps)
    else:
        # a sample of chunks is shared by all P partitions in row pieces: every selection pass runs P tasks
        with sample_session(run, data, chunks) as (over, selected):
            sel = select_hyperparameters(
                over, problem, lams=s.grid_lams, params=s.loss_param_grid(problem.loss),
                gammas=s.kernel_param_grid(problem.output.kernel), chunks=selected, say=log.message,
            )  # fmt: skip
        loss = problem.loss if sel.param is None else problem.loss.with_param(sel.param)
        problem = problem.replace(lam=sel.lam, loss=loss, output=sel.output, maps=sel.maps)
        if chunks is None or not loss.is_square:  # the selection's rows: all of them, or the MM metric's
            sums = (sel.sums.train + sel.sums.held).project(problem.Phi_theta)
        else:  # the closed form on all rows, both sides of the split
            tic = time.perf_counter()
            sums = problem_sums(run, problem, "closed form sums (all rows)")
            seconds = time.perf_counter() - tic
            log.message(f"feature sums of all {sums.n} curves computed by the partition tasks ({seconds:.1f} s)")
        if chunks is not None:
            lam = float(f"{sel.lam * sel.n_train / data.n:.6g}")
            log.message(
                f"selection ran on {sel.n_train + sel.n_held} curves of {len(chunks)} of {data.n_chunks} chunks "
                f"(shared by the {len(run.partitions)} partitions in row pieces); "
                f"λ = {sel.lam:.0e} scaled by {sel.n_train} / {data.n} curves to λ = {lam:.3g} for all of them (λ·n "
                "constant)" + ("" if loss.is_square else "; the MM metric is their feature covariance")
            )
            problem = problem.replace(lam=lam)
        log.message(f"now fitting the selected model on all {data.n} curves")
        start = Start(coef=sel.coef, sums=sums)
    kernel = problem.output.kernel
    log.info.update(
        lam=problem.lam,
        loss_param=None if problem.loss.param_name is None else float(getattr(problem.loss, problem.loss.param_name)),
        gamma_theta=float(getattr(kernel, kernel.param_name)) if kernel.param_name else None,
    )
    return problem, start, sel
