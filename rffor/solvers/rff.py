"""The random-feature solver (MATH.md §5): one fit route, whatever executes it.

``FunctionalRegressor.fit → fit_rff → executor session → task on the partition's data → dsgd``. :func:`fit_rff` is
an ordinary driver loop; every pass over the training data is a task per partition run by an executor
(:mod:`rffor.executor`: in process, or on Dask where the data is), and the driver only combines small matrices:

1. feature maps, built once (φ_X: random Fourier features regenerated from their seed wherever used, or Nyström
   features of centres read from the data; φ_Θ: the exact factor of K_Θ or random output features) and shared once
   with the tasks;
2. with ``lam="auto"``, the candidates of :mod:`rffor.solvers.selection` (closed forms, then MM passes for a robust
   loss), each pass a task per partition;
3. square loss: the one-pass closed form: every partition reduces the triangular (TSQR) factor of
   ``[Φ_X | Y Φ_Θ]`` over its rows (:class:`FeatureSums`; with ``lam="auto"`` of ``[Φ_X | Y]``, projected on the
   selected output factor on the driver), the driver merges them and solves
   ``C_X B C_Θ + λ B = M`` from the factor's singular value decomposition;
4. other losses (``rff_method="mm"``, the default): majorize–minimize passes from that closed form (or from the
   selected candidate), each a map-reduce of the gradient (:mod:`rffor.solvers.mm`);
5. ``rff_method="sgd"``: the closed form over a sample of rows spread over the data (:func:`init_chunks`), refined
   by reweighted closed forms for losses that offer IRLS weights (:meth:`rffor.losses.Loss.irls_weights`), the
   preconditioner from the covariance of the same rows, then rounds of local DSGD with periodic averaging
   (MATH.md §5): one task per partition runs K steps from the current state
   (:func:`rffor.solvers.dsgd.partition_steps`, seeded by ``(random_state, round, partition)``), the driver
   averages the partitions' states in partition order, writes a checkpoint (:mod:`rffor.checkpoint`) and reports
   progress (:mod:`rffor.progress`).

Because partitions and seeds, not workers, define the computation and results are combined in partition order, the
serial executor and a Dask cluster give the same bits for the same P, as do a round rerun after a lost worker and
a fit resumed from its checkpoint (given one BLAS thread per process, as Dask's Nanny workers have).
"""

from __future__ import annotations

import math
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .. import checkpoint as ckpt_io
from .._linalg import triangular_update
from .._validation import check_choice, check_dtype, check_int, check_real, check_seed, fill_missing
from ..chunked import as_data
from ..features import DEFAULT_OUTPUT_RANK_TOL, RandomFourierFeatures, make_output_features
from ..kernels import MEDIAN_HEURISTIC_ROWS, Kernel, median_heuristic
from ..losses import Loss, Square
from ..progress import Progress
from .dsgd import LevelSampler, Preconditioner, SGDConfig, SGDState, epoch_steps, partition_steps
from .feature_cache import cached_block, release_task
from .mm import MMRun, SquareMetric, grad_task, mm_steps
from .selection import DEFAULT_LAMS, both_sides_grad_task, select_hyperparameters, split_sums_task

__all__ = [
    "RFF_DEFAULTS",
    "FeatureSums",
    "FitMaps",
    "feature_sums",
    "closed_form_from_sums",
    "square_objective_from_sums",
    "reweighted_closed_form",
    "objective",
    "predict",
    "RoundPlan",
    "average_states",
    "RFFResult",
    "make_feature_maps",
    "OutputMap",
    "make_input_features",
    "make_output_map",
    "output_gram",
    "auto_step_size",
    "init_chunks",
    "fit_rff",
]

#: rows of a chunk whose features are computed at once by feature_sums / objective / predict
_BLOCK_ROWS = 4096

#: the defaults of the random-feature fit, one home for :func:`fit_rff`, the estimator and the command line
RFF_DEFAULTS: dict[str, Any] = {
    "n_features_x": 1000,
    "input_features": "auto",
    "output_features": "exact",
    "n_features_theta": None,
    "output_rank_tol": DEFAULT_OUTPUT_RANK_TOL,
    "batch_size": 256,
    "n_epochs": 10,
    "init": "closed_form",
    "init_max_rows": None,
    "init_reweight": 10,
    "precondition_rank": 50,
    "dtype": None,
    "rff_method": "auto",
    "tol": 1e-6,
    "max_passes": 300,
    "lams": None,
    "loss_params": None,
    "kernel_theta_params": None,
    "holdout": 10,
    "selection_rows": 200_000,
    "feature_cache": 2**32,
}


# ---------------------------------------------------------------------------------------------------------------
# map-reduce passes: sums over chunks
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FeatureSums:
    """What the closed form needs of a set of rows (MATH.md §5, square loss), kept as a triangular factor:
    ``+`` combines two of them (the reduce step, a TSQR merge: :func:`rffor._linalg.triangular_update`).

    Rows enter as ``[φ_X(x_i) | y_iᵀ Φ_Θ]`` (times ``√w_i`` when weighted); ``r = [R | Z]`` is the R factor of
    their stack, so that ``Σ w_i φ_X φ_Xᵀ = RᵀR`` and ``Σ w_i φ_X y_iᵀ Φ_Θ = RᵀZ``. The normal equations' sums
    would square the features' condition number: R keeps their small singular values to the rounding of the
    largest, which the closed form at the tiny λ of noise-free curves needs (:meth:`SquareMetric.from_sums
    <rffor.solvers.mm.SquareMetric.from_sums>`; on the clean curves of benchmarks/learning_curve.py, 10^5 rows,
    test NMSE 3.51e-10 against 3.62e-10 from the sums).

    Attributes
    ----------
    r : ndarray of shape (D_x, D_x + k), float64
        ``[R | Z]``, R upper triangular; k = D_θ, or m for the raw outputs (``Φ_Θ = I``; :meth:`project`).
    yy : float
        ``Σ_i w_i Σ_j y_ij²`` of the filled outputs (for the objective of the closed form).
    n : int
        Rows summed.
    n_missing : int
        Missing output entries seen (filled for the sums, MATH.md §3.3).
    loss : float
        ``Σ_i L(r_i)`` at the B of a reweighted pass (0 otherwise).
    """

    r: np.ndarray
    yy: float = 0.0
    n: int = 0
    n_missing: int = 0
    loss: float = 0.0

    def __add__(self, other: FeatureSums) -> FeatureSums:
        return FeatureSums(
            triangular_update(self.r, other.r),
            self.yy + other.yy,
            self.n + other.n,
            self.n_missing + other.n_missing,
            self.loss + other.loss,
        )

    @classmethod
    def zeros(cls, D_x: int, k: int) -> FeatureSums:
        return cls(np.zeros((D_x, D_x + k)))

    @property
    def R(self) -> np.ndarray:
        """ndarray of shape (D_x, D_x): ``Σ w_i φ_X φ_Xᵀ = RᵀR``."""
        return self.r[:, : self.r.shape[0]]

    @property
    def Z(self) -> np.ndarray:
        """ndarray of shape (D_x, k): ``Σ w_i φ_X y_iᵀ Φ_Θ = RᵀZ``."""
        return self.r[:, self.r.shape[0] :]

    @property
    def xx(self) -> np.ndarray:
        """``Σ_i w_i φ_X(x_i) φ_X(x_i)ᵀ``, shape (D_x, D_x) (from R: for the preconditioner and tests)."""
        return self.R.T @ self.R

    @property
    def xy(self) -> np.ndarray:
        """``Σ_i w_i φ_X(x_i) y_iᵀ Φ_Θ``, shape (D_x, k)."""
        return self.R.T @ self.Z

    def project(self, Phi_theta: np.ndarray) -> FeatureSums:
        """The sums of an output feature map from those of the raw outputs (summed with ``Phi_theta=None``,
        k = m): ``Z Φ_Θ`` (the factor of ``[Φ_X | Y Φ_Θ]`` has the same R), in float64 on the driver.

        Parameters
        ----------
        Phi_theta : ndarray of shape (m, D_θ)
        """
        Z = self.Z @ np.asarray(Phi_theta, dtype=np.float64)
        return FeatureSums(np.hstack([self.R, Z]), self.yy, self.n, self.n_missing, self.loss)


@dataclass
class FitMaps:
    """The feature maps every task of a fit needs, shared with the tasks once per fit.

    Attributes
    ----------
    input_features : feature map
        φ_X (random Fourier features pickle without their frequencies: redrawn from the seed where used).
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the training grid, in the fit's dtype.
    cache_key : str or None
        The fit's key in every process's feature cache (:mod:`rffor.solvers.feature_cache`); None: no cache.
    cache_bytes : int
        Bytes of features each process may keep for this fit.
    """

    input_features: Any
    Phi_theta: np.ndarray
    cache_key: str | None = None
    cache_bytes: int = 0

    def block_features(self, part, chunk_id: int, start: int, X_block: np.ndarray) -> np.ndarray:
        """``φ_X`` of the rows ``X_block`` (rows ``start …`` of chunk ``chunk_id`` of ``part``), shape (rows, D_x),
        through the feature cache (read-only when cached: do not modify it)."""
        return cached_block(
            self.cache_key,
            self.cache_bytes,
            getattr(part, "cache_tag", "all"),
            chunk_id,
            start,
            lambda: self.input_features.transform(X_block),
        )


def feature_sums(
    data,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    chunk_ids=None,
    weights: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    maps: FitMaps | None = None,
    shift: np.ndarray | None = None,
) -> FeatureSums:
    """Map step of the closed form: the sums of :class:`FeatureSums` over some chunks.

    Features are computed in their own dtype (float32 by default) a block of rows at a time, and every block's
    products are accumulated in float64.

    Parameters
    ----------
    data : chunked dataset (:mod:`rffor.chunked`)
    input_features : feature map

        φ_X.
    Phi_theta : ndarray of shape (m, D_θ) or None
        Output features on the grid; None: the raw outputs (``xy = Σ φ_X(x_i) y_iᵀ``, shape (D_x, m), which
        :meth:`FeatureSums.project` turns into the sums of any output feature map: the selection of k_Θ).
    chunk_ids : sequence of int, optional
        Chunks to sum over; default all.
    weights : callable ``(Phi, Y) -> w``, optional
        Row weights: called on every block with its features ``Phi`` (rows, D_x) in their dtype and its outputs
        ``Y`` (rows, m) in float64, NaN where unobserved; returns ``w`` (rows,) ≥ 0. Every row's terms are then
        multiplied by its weight (``n`` stays the number of rows). Used by the reweighted warm start.
    maps : FitMaps, optional
        When given, features come through its feature cache (:meth:`FitMaps.block_features`).
    shift : ndarray of shape (m,), optional
        Sum the outputs ``Y + shift`` instead (the location-shift warm start of quantile functions,
        :func:`fit_rff`'s ``init_shift``).

    Returns
    -------
    FeatureSums
    """
    theta = np.asarray(data.theta, dtype=np.float64)
    dtype = input_features.dtype
    if Phi_theta is not None:
        Phi_theta = np.ascontiguousarray(Phi_theta, dtype=dtype)
    sums = FeatureSums.zeros(input_features.n_features, data.m if Phi_theta is None else Phi_theta.shape[1])
    ids = range(data.n_chunks) if chunk_ids is None else [int(i) for i in chunk_ids]
    for i, X_i, Y_i in data.iter_chunks(ids):
        # outputs in the fit's dtype first, as DSGD sees them: in-memory float64 and stored float32 data then
        # give the same sums
        Y_obs = np.asarray(Y_i, dtype=dtype).astype(np.float64)
        missing = int(np.isnan(Y_obs).sum())
        Y64 = fill_missing(Y_obs, theta) if missing else Y_obs
        if shift is not None:
            Y64 = Y64 + np.asarray(shift, dtype=np.float64)[None, :]
        sums.n += Y64.shape[0]
        sums.n_missing += missing
        YP = Y64.astype(dtype) if Phi_theta is None else Y64.astype(dtype) @ Phi_theta  # (c, D_θ) or (c, m)
        if weights is None:
            sums.yy += float(np.einsum("ij,ij->", Y64, Y64))
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            X_b = X_i[s : s + _BLOCK_ROWS]
            Phi = input_features.transform(X_b) if maps is None else maps.block_features(data, i, s, X_b)
            YP_b = YP[s : s + _BLOCK_ROWS]
            if weights is not None:
                w = np.asarray(weights(Phi, Y_obs[s : s + _BLOCK_ROWS]), dtype=np.float64)
                Y_b = Y64[s : s + _BLOCK_ROWS]
                sums.yy += float(np.einsum("i,ij,ij->", w, Y_b, Y_b))
                root = np.sqrt(w).astype(dtype)[:, None]
                Phi = Phi * root  # a new array: Phi may be a cached block
                YP_b = YP_b * root
            sums.r = triangular_update(sums.r, np.hstack([Phi, YP_b]))
    return sums


def closed_form_from_sums(sums: FeatureSums, C_theta: np.ndarray, lam: float, m: int) -> np.ndarray:
    """The minimiser of (P_rf) for the square loss (MATH.md §5): ``C_X B C_Θ + λ B = M``.

    Parameters
    ----------
    sums : FeatureSums
        Over all the data.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` (a 1-D array is a diagonal: the exact output factor).
    lam : float
        λ > 0.
    m : int
        Grid size.

    Returns
    -------
    B : ndarray of shape (D_x, D_θ), float64
        With ``C_X = xx / n`` and ``M = xy / (n m)``, solved from their triangular factor
        (:meth:`~rffor.solvers.mm.SquareMetric.closed_form`).
    """
    if sums.n == 0:
        raise ValueError("no rows were summed")
    return SquareMetric.from_sums(sums, C_theta, lam).closed_form(sums, m)


def square_objective_from_sums(sums: FeatureSums, B: np.ndarray, C_theta: np.ndarray, lam: float, m: int) -> float:
    """J(B) of the square loss on the filled outputs, from the sums alone (no pass over the data).

    ``J = (1/(2nm)) [Σ y² − 2 <B, xy> + <B, xx B C_Θ> m] + (λ/2)‖B‖²``, with ``<B, xy> = <RB, Z>`` and
    ``<B, xx B C_Θ> = <RB, RB C_Θ>`` (:class:`FeatureSums`' factor).
    """
    B = np.asarray(B, dtype=np.float64)
    C_theta = np.asarray(C_theta, dtype=np.float64)
    RB = sums.R @ B
    RBC = RB * C_theta if C_theta.ndim == 1 else RB @ C_theta
    quad = float(np.sum(RB * RBC)) * m
    data_term = (sums.yy - 2.0 * float(np.sum(RB * sums.Z)) + quad) / (2.0 * sums.n * m)
    return data_term + 0.5 * lam * float(np.sum(B * B))


def _irls_weights(loss: Loss, Phi_theta: np.ndarray, B: np.ndarray, dtype, acc: list) -> Callable:
    """Row weights of a reweighted pass at B (for :func:`feature_sums`), accumulating ``Σ L(r_i)`` into acc[0]."""
    # predictions in the features' dtype (a float64 copy of every block of features would double the transient
    # memory of the pass); residuals and weights in float64
    P64 = np.asarray(Phi_theta, dtype=dtype).astype(np.float64)
    BPt = (np.asarray(B, dtype=np.float64) @ P64.T).astype(dtype)  # (D_x, m)

    def weights(Phi: np.ndarray, Y: np.ndarray) -> np.ndarray:
        R = Y - Phi @ BPt  # NaN where unobserved: the losses mask them
        acc[0] += float(np.sum(loss.curve_values(R)))
        return loss.irls_weights(R)

    return weights


def sums_task(
    part, p: int, chunk_ids: Sequence[int], maps: FitMaps, B=None, loss: Loss | None = None, shift=None
) -> FeatureSums:
    """The map step of a closed form over one partition's chunks (a task of :meth:`executor session.reduce`).

    Without ``B``: the plain sums of :func:`feature_sums` (of ``Y + shift`` with a ``shift``). With ``B`` and
    ``loss``: the sums of the reweighted square loss at B (rows weighted by ``loss.irls_weights`` of their
    residuals, :func:`feature_sums`'s ``weights``) and, in ``loss``, the sum of the curves' losses at B.
    """
    if B is None:
        return feature_sums(part, maps.input_features, maps.Phi_theta, chunk_ids, maps=maps, shift=shift)
    acc = [0.0]
    weights = _irls_weights(loss, maps.Phi_theta, B, maps.input_features.dtype, acc)
    sums = feature_sums(part, maps.input_features, maps.Phi_theta, chunk_ids, weights=weights, maps=maps)
    sums.loss = acc[0]
    return sums


def reweighted_closed_form(
    run,
    maps,
    C_theta: np.ndarray,
    loss: Loss,
    lam: float,
    B0: np.ndarray,
    chunks: Sequence[int] | None = None,
    *,
    m: int,
    max_iter: int = 10,
    tol: float = 1e-3,
) -> tuple[np.ndarray, list[float]]:
    """Warm start of a loss offering IRLS weights: closed forms of the reweighted square loss from B0.

    The square-loss closed form at a small λ fits the outliers, mostly along the directions of small variance of
    the input features, which DSGD moves slowest (even preconditioned, beyond its rank): started there, a robust
    fit stays near the non-robust solution for many epochs. Each reweighting is one reduce over the rows (``O(rows
    D_x²)``, on the workers) and one eigendecomposition of C_X (on the driver); for H_κ^2 the weights make a
    majoriser and the objective decreases monotonically.

    Parameters
    ----------
    run : executor session (:mod:`rffor.executor`)
    maps : FitMaps or a handle of it from ``run.share``
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
    loss : Loss
        With :meth:`~rffor.losses.Loss.irls_weights`.
    lam : float
    B0 : ndarray of shape (D_x, D_θ)
        Start (the square-loss closed form).
    chunks : sequence of int, optional
        The rows' chunks (default all).
    m : int
        Grid size.
    max_iter : int, default 10
        Reweighted solves at most.
    tol : float, default 1e-3
        Stop when an iteration lowers the objective ``(1/n) Σ L(r_i) + (λ/2)‖B‖²`` on these rows by less than
        ``tol`` times its value.

    Returns
    -------
    B : ndarray of shape (D_x, D_θ), float64
        The iterate of lowest objective.
    objectives : list of float
        The objective of B0 and of every iterate evaluated.
    """
    B = np.asarray(B0, dtype=np.float64)
    best, best_obj, objectives = B, math.inf, []
    for it in range(max_iter + 1):
        wsums = run.reduce(sums_task, maps, B, loss, chunks=chunks, label=f"reweighting {it}")
        obj = wsums.loss / max(wsums.n, 1) + 0.5 * lam * float(np.sum(B * B))
        objectives.append(obj)
        if obj < best_obj:
            improvement = best_obj - obj
            best, best_obj = B, obj
            if improvement <= tol * abs(obj):
                break
        else:  # H_κ^1's curve weights are not a majoriser: stop at the first step that does not help
            break
        if it == max_iter:
            break
        B = closed_form_from_sums(wsums, C_theta, lam, m)
    return best, objectives


def objective(
    data,
    B: np.ndarray,
    input_features,
    Phi_theta: np.ndarray,
    loss: Loss,
    lam: float,
    chunk_ids=None,
) -> float:
    """The exact objective J(B) of (P_rf) by one pass over the data in this process (missing entries masked,
    float64 products).

    Parameters
    ----------
    data : chunked dataset
    B : ndarray of shape (D_x, D_θ)
    input_features : feature map
    Phi_theta : ndarray of shape (m, D_θ)
    loss : Loss
    lam : float
    chunk_ids : sequence of int, optional
        Restrict the data term to these chunks (default all).

    Returns
    -------
    J : float
        ``(1/n) Σ_i L(y_i − Φ_Θ Bᵀ φ_X(x_i)) + (λ/2) ‖B‖_F²``.
    """
    B = np.asarray(B, dtype=np.float64)
    BPt = B @ np.asarray(Phi_theta, dtype=np.float64).T  # (D_x, m)
    theta = np.asarray(data.theta)
    total, n = 0.0, 0
    ids = range(data.n_chunks) if chunk_ids is None else [int(i) for i in chunk_ids]
    for _, X_i, Y_i in data.iter_chunks(ids):
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            Phi = input_features.transform(X_i[s : s + _BLOCK_ROWS]).astype(np.float64)
            R = np.asarray(Y_i[s : s + _BLOCK_ROWS], dtype=np.float64) - Phi @ BPt
            total += float(np.sum(loss.curve_values(R, theta)))
            n += R.shape[0]
    return total / n + 0.5 * lam * float(np.sum(B * B))


def predict(
    coef: np.ndarray,
    input_features,
    Phi_theta: np.ndarray,
    X: np.ndarray,
) -> np.ndarray:
    """``Ĥ = Φ_X(X) B Φ_Θᵀ`` (MATH.md §5), a block of rows at a time.

    Parameters
    ----------
    coef : ndarray of shape (D_x, D_θ)
    input_features : feature map
    Phi_theta : ndarray of shape (q, D_θ)
        Output features where the curves are wanted.
    X : ndarray of shape (n, d)

    Returns
    -------
    Y_hat : ndarray of shape (n, q), in the features' dtype.
    """
    dtype = input_features.dtype
    coef = np.asarray(coef, dtype=dtype)
    BPt = coef @ np.asarray(Phi_theta, dtype=dtype).T  # (D_x, q)
    out = np.empty((X.shape[0], BPt.shape[1]), dtype=dtype)
    for s in range(0, X.shape[0], _BLOCK_ROWS):
        np.matmul(input_features.transform(X[s : s + _BLOCK_ROWS]), BPt, out=out[s : s + _BLOCK_ROWS])
    return out


# ---------------------------------------------------------------------------------------------------------------
# rounds of local SGD with parameter averaging
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class RoundPlan:
    """What the partition tasks of every round need besides their data and the state; shared once per fit.

    Attributes
    ----------
    round_steps : list of int
        K of each round: the local steps every partition runs in that round.
    config : SGDConfig
        With the preconditioner.
    input_features : feature map
        φ_X (random Fourier features pickle without their frequencies).
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid, in ``config.dtype``.
    random_state : int
        Seeds task (round r, partition p) with ``(random_state, r, p)``.
    n_partitions : int
        P.
    """

    round_steps: list[int]
    config: SGDConfig
    input_features: Any
    Phi_theta: np.ndarray
    random_state: int
    n_partitions: int = 1

    @property
    def n_rounds(self) -> int:
        return len(self.round_steps)

    def seed(self, round: int, partition: int) -> tuple[int, int, int]:
        """Seed of task (round, partition)."""
        return (self.random_state, int(round), int(partition))

    def run_partition(self, data, partition: int, chunk_ids, state: SGDState, round: int):
        """One partition's K local steps of one round: :func:`rffor.solvers.dsgd.partition_steps`."""
        return partition_steps(
            state,
            data,
            chunk_ids,
            self.round_steps[round],
            self.config,
            self.input_features,
            self.Phi_theta,
            self.seed(round, partition),
        )


def round_task(part, p: int, chunk_ids, plan: RoundPlan, state: SGDState, round: int):
    """A task of a round (:meth:`executor session.map`): partition p's local steps; returns (SGDState, steps,
    loss_sum)."""
    return plan.run_partition(part, p, chunk_ids, state, round)


def average_states(state: SGDState, results: Sequence[tuple[SGDState, int, float]]) -> tuple[SGDState, int, float]:
    """Average the partitions' states weighted by their steps, in the given (partition) order.

    Returns
    -------
    state : SGDState
        ``B = Σ_p w_p B_p`` and ``B_avg = Σ_p w_p B_avg,p`` with ``w_p = steps_p / Σ steps`` (sums in float64, in
        partition order), ``t`` advanced by the largest ``steps_p``. With one partition, exactly its state.
    steps : int
        Total steps of the round over partitions.
    loss_sum : float
        Total of the partitions' loss sums.
    """
    total = sum(int(r[1]) for r in results)
    loss_sum = float(sum(float(r[2]) for r in results))
    if total == 0:
        return state.copy(), 0, loss_sum
    B = np.zeros(state.B.shape, dtype=np.float64)
    B_avg = np.zeros(state.B_avg.shape, dtype=np.float64)
    for st, steps, _ in results:
        if steps:
            w = steps / total
            B += w * st.B
            B_avg += w * st.B_avg
    t = state.t + max(int(r[1]) for r in results)
    return SGDState(B.astype(state.B.dtype), B_avg, t), total, loss_sum


# ---------------------------------------------------------------------------------------------------------------
# the fit
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class RFFResult:
    """A fitted random-feature model ``h(x)(θ) = φ_X(x)ᵀ B φ_Θ(θ)`` (MATH.md §5).

    Attributes
    ----------
    coef : ndarray of shape (D_x, D_θ)
        B (the Polyak–Ruppert average for DSGD), in the fit's dtype.
    input_features : feature map
    output_features : ExactOutputFactor or RandomOutputFeatures
    theta : ndarray of shape (m,)
        Training grid.
    n_iter : int
        DSGD steps per partition (the global counter t; 0 for the closed form alone).
    history : list of dict
        One record per round (``round``, ``t``, ``steps``, ``loss`` (mean minibatch loss), ``objective``
        (``loss + (λ/2)‖B_avg‖²``, an estimate of J), ``seconds``, ``samples_per_s``), after a record
        ``round = -1`` for the square-loss closed form.
    method : str
        "closed_form", or "sgd" (DSGD, possibly from the closed form).
    random_state : int
        The seed every random draw came from.
    n_partitions : int
        P.
    state : SGDState or None
        Final DSGD state (to continue training).
    plan : RoundPlan or None
    warm_coef : ndarray of shape (D_x, D_θ) or None
        MM: the warm start B (the square-loss closed form, or with ``lam="auto"`` the selected path model), to
        compare with the final model.
    lam : float or None
        The λ of the model (the selected one with ``lam="auto"``).
    loss : Loss or None
        The loss of the model (with the selected κ or ε with ``loss_params``).
    kernel_x : Kernel or None
        k_X (the median heuristic's when ``fit_rff`` got None).
    kernel_theta : Kernel or None
        k_Θ of the model (the selected one with ``kernel_theta_params``).
    path : Selection or None
        ``lam="auto"``: what the selection evaluated (:mod:`rffor.solvers.selection`): candidates, held-out scores,
        walks.
    """

    coef: np.ndarray
    input_features: Any
    output_features: Any
    theta: np.ndarray
    n_iter: int
    history: list[dict]
    method: str
    random_state: int
    n_partitions: int = 1
    state: SGDState | None = None
    plan: RoundPlan | None = field(default=None, repr=False)
    warm_coef: np.ndarray | None = field(default=None, repr=False)
    lam: float | None = None
    loss: Loss | None = None
    kernel_x: Kernel | None = None
    kernel_theta: Kernel | None = None
    path: Any = field(default=None, repr=False)

    @property
    def objective_history(self) -> np.ndarray:
        """Objective (estimate) per record of ``history``."""
        return np.array([h["objective"] for h in self.history], dtype=np.float64)

    def predict(self, X: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Curves at inputs X (n, d), on the training grid or at ``theta`` (q,); returns (n, m) or (n, q)."""
        grid = self.theta if theta is None else theta
        return predict(self.coef, self.input_features, self.output_features.transform(grid), np.asarray(X))


def output_gram(output_features, Phi_theta: np.ndarray) -> np.ndarray:
    """``C_Θ = Φ_Θᵀ Φ_Θ / m`` on the grid: the exact diagonal for the exact factor, else a (D_θ, D_θ) matrix."""
    exact = getattr(output_features, "C_theta", None)  # a map that knows its Gram on the grid says so (diagonal)
    if exact is not None:
        return exact
    P = np.asarray(Phi_theta, dtype=np.float64)
    return P.T @ P / P.shape[0]


@dataclass
class OutputMap:
    """The output side of the random-feature model (MATH.md §5): k_Θ, its feature map φ_Θ, ``Φ_Θ`` on the training
    grid and ``C_Θ = Φ_Θᵀ Φ_Θ / m``. A fit has one; a selection of k_Θ (``kernel_theta_params``) one per γ tried.

    Attributes
    ----------
    kernel : Kernel
        k_Θ.
    features : ExactOutputFactor or RandomOutputFeatures
        φ_Θ (evaluates anywhere on Θ).
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the training grid, in the fit's dtype.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        :func:`output_gram` (1-D: diagonal, the exact factor).
    """

    kernel: Kernel
    features: Any
    Phi_theta: np.ndarray = field(repr=False)
    C_theta: np.ndarray = field(repr=False)

    @property
    def n_features(self) -> int:
        """D_θ."""
        return int(self.Phi_theta.shape[1])

    def coef_from(self, other: OutputMap, B: np.ndarray) -> np.ndarray:
        """A model B of ``other``'s output map expressed in this one: the least-squares fit, on the grid, of its
        curve coefficients ``W = B Φ_Θ,otherᵀ`` (D_x × m) by ``X Φ_Θᵀ`` (the warm start of a selection candidate
        whose k_Θ differs from its neighbour's).

        Parameters
        ----------
        other : OutputMap
        B : ndarray of shape (D_x, other.n_features)

        Returns
        -------
        ndarray of shape (D_x, self.n_features), float64
        """
        B = np.asarray(B, dtype=np.float64)
        if other is self:
            return B
        W = B @ np.asarray(other.Phi_theta, dtype=np.float64).T
        return np.linalg.lstsq(np.asarray(self.Phi_theta, dtype=np.float64), W.T, rcond=None)[0].T


def make_input_features(
    d: int,
    random_state: int,
    *,
    kernel_x: Kernel,
    n_features_x: int = 1000,
    input_features: str = "rff",
    centres: np.ndarray | None = None,
    dtype: str = "float32",
):
    """φ_X of a fit, as :func:`fit_rff` builds it (seed ``(random_state, 0)`` for random features; see
    :func:`make_feature_maps` for the parameters)."""
    if input_features == "nystrom":
        if centres is None:
            raise ValueError("input_features='nystrom' needs centres (rows of the training inputs)")
        from ..features import NystromFeatures

        return NystromFeatures(kernel_x, centres, dtype=dtype)
    orf = {"orthogonal": True} if input_features == "orf" else {}
    return RandomFourierFeatures(kernel_x, n_features_x, d, seed=(random_state, 0), dtype=dtype, **orf)


def make_output_map(
    kernel_theta: Kernel,
    theta: np.ndarray,
    random_state: int,
    *,
    output_features: str = "exact",
    n_features_theta: int | None = None,
    output_rank_tol: float = DEFAULT_OUTPUT_RANK_TOL,
    dtype: str = "float32",
) -> OutputMap:
    """The output side of a fit, as :func:`fit_rff` builds it (seed ``(random_state, 1)`` for random output
    features; see :func:`make_feature_maps` for the parameters)."""
    theta = np.asarray(theta, dtype=np.float64)
    phi_theta = make_output_features(
        output_features,
        kernel_theta,
        theta,
        n_features=n_features_theta,
        tol=output_rank_tol,
        seed=(random_state, 1),
        dtype=dtype,
    )
    Phi_theta = np.ascontiguousarray(phi_theta.transform(theta), dtype=dtype)
    return OutputMap(kernel_theta, phi_theta, Phi_theta, output_gram(phi_theta, Phi_theta))


def make_feature_maps(
    d: int,
    theta: np.ndarray,
    random_state: int,
    *,
    kernel_x: Kernel,
    kernel_theta: Kernel,
    n_features_x: int = 1000,
    input_features: str = "rff",
    centres: np.ndarray | None = None,
    output_features: str = "exact",
    n_features_theta: int | None = None,
    output_rank_tol: float = DEFAULT_OUTPUT_RANK_TOL,
    dtype: str = "float32",
) -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """The feature maps of a fit, exactly as :func:`fit_rff` builds them (seeds ``(random_state, 0)`` for φ_X and
    ``(random_state, 1)`` for random output features).

    Parameters
    ----------
    input_features : {"rff", "orf", "nystrom"}, default "rff"
        φ_X: random Fourier features, orthogonal random features, or the Nyström map of k_X on ``centres``.
    centres : ndarray of shape (M, d), optional
        Nyström centres (rows of the training inputs: :func:`sample_centres`).

    Returns
    -------
    phi_x : RandomFourierFeatures or NystromFeatures
    phi_theta : ExactOutputFactor or RandomOutputFeatures
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the grid, in ``dtype``.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` (:func:`output_gram`).
    """
    phi_x = make_input_features(
        d, random_state, kernel_x=kernel_x, n_features_x=n_features_x, input_features=input_features,
        centres=centres, dtype=dtype,
    )  # fmt: skip
    out = make_output_map(
        kernel_theta, theta, random_state, output_features=output_features, n_features_theta=n_features_theta,
        output_rank_tol=output_rank_tol, dtype=dtype,
    )  # fmt: skip
    return phi_x, out.features, out.Phi_theta, out.C_theta


def _centre_rows_task(part, p: int, chunk_ids, wanted: dict[int, np.ndarray]) -> list[np.ndarray]:
    """The rows ``wanted[i]`` (local indices) of the inputs of each of the partition's chunks i, in chunk order."""
    return [np.array(X_i[wanted[i]]) for i, X_i, _ in part.iter_chunks([int(i) for i in chunk_ids])]


def sample_centres(run, data, n_centres: int, seed) -> np.ndarray:
    """Nyström centres: ``min(M, n)`` input rows drawn uniformly without replacement from all n rows.

    The row indices are drawn on the driver (``numpy`` Generator seeded by ``seed``); the rows are read by the
    partition tasks of the chunks that hold them (:meth:`executor session.map`), only M rows of d values travel.

    Parameters
    ----------
    run : executor session
    data : chunked dataset
    n_centres : int
        M.
    seed : int or tuple of ints
        Seed of the draw (:func:`rffor.features.seed_sequence`).

    Returns
    -------
    ndarray of shape (min(M, n), d), float64
        In increasing row order.
    """
    from ..features import seed_sequence

    rng = np.random.default_rng(seed_sequence(seed))
    rows = np.sort(rng.choice(data.n, size=min(int(n_centres), data.n), replace=False))
    c = data.chunk_rows
    wanted = {int(i): rows[rows // c == i] - i * c for i in np.unique(rows // c)}
    parts = run.map(_centre_rows_task, wanted, chunks=sorted(wanted), label="Nyström centres")
    return np.concatenate([r for part in parts if part is not None for r in part]).astype(np.float64)


def auto_step_size(C_theta: np.ndarray, lam: float, *, subsample: bool = False) -> float:
    """A stable DSGD step η₀ (MATH.md §5).

    The Hessian of a step's objective is ``(1/b) Σ_i φ_X(x_i) φ_X(x_i)ᵀ ⊗ A_i + λ I`` with ``‖φ_X‖ = 1`` and
    ``A_i = Φ_Θ,Sᵀ Φ_Θ,S / |S|`` over the entries S used for curve i (the curve losses are ``½‖·‖² □ g``, so their
    curvature is at most the square loss's; the pinball losses have gradients bounded by 1 entrywise, so the steps
    stay bounded whatever their curvature: :mod:`rffor.solvers.dsgd`). For whole, fully observed curves
    ``A_i = C_Θ``, so ``η₀ = 0.99 / (‖C_Θ‖ + λ)`` is stable; for subsets (θ-subsampling) only
    ``‖A_i‖ ≤ max k_Θ(θ, θ) = 1`` holds, giving ``0.99 / (1 + λ)``.

    Curves with few observed values can have ``‖A_i‖`` up to ``min(1, ‖C_Θ‖ m / m_i)``; minibatch averaging keeps
    the first rule stable in practice (measured: batches of 8 curves with a single observed value each were
    stable at 3x this step; batches of 1 were not). A diverging run raises ``FloatingPointError``.

    Parameters
    ----------
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` on the grid (a 1-D array is its diagonal).
    lam : float
    subsample : bool, default False
        Whether steps use subsets of the locations (θ-subsampling of an integral loss).

    Returns
    -------
    float
    """
    C = np.asarray(C_theta, dtype=np.float64)
    norm = float(C.max()) if C.ndim == 1 else float(np.linalg.eigvalsh(C)[-1])
    return 0.99 / (1.0 + lam) if subsample else 0.99 / (min(norm, 1.0) + lam)


def init_chunks(data, max_rows: int) -> list[int]:
    """Evenly spread chunk ids holding about ``max_rows`` rows (all chunks if there are fewer rows): the rows of
    the warm start and of the preconditioner's covariance, spread over the data and so over its partitions."""
    k = data.n_chunks
    want = min(k, max(1, -(-max_rows // data.chunk_rows)))
    return sorted(set(np.linspace(0, k - 1, want).round().astype(int).tolist()))


def _loss_param_grid(loss_params, loss: Loss, lam) -> list[float] | None:
    """The loss-parameter grid of ``loss_params`` (validated), or None when the loss's parameter is fixed."""
    if loss_params is None:
        return None
    if lam != "auto":
        raise ValueError(f"loss_params={loss_params!r} needs lam='auto' (both are chosen on the same held-out rows)")
    if loss.param_name is None:
        raise ValueError(f"loss_params: {loss!r} has no κ or ε to choose")
    if isinstance(loss_params, str):
        check_choice(loss_params, "loss_params", {"auto"})
        start = float(getattr(loss, loss.param_name))
        if not 0 < start < math.inf:
            raise ValueError(
                f"loss_params='auto' walks from the loss's own {loss.param_name} by factors of √10: it must be a "
                f"positive finite number, got {loss!r}"
            )
        return [start]
    grid = [check_real(v, "loss_params[i]", low=0, low_open=True) for v in loss_params]
    if not grid:
        raise ValueError("loss_params must hold at least one value")
    return grid


def _kernel_param_grid(kernel_theta_params, kernel_theta: Kernel, lam) -> list[float] | None:
    """The grid of k_Θ's γ of ``kernel_theta_params`` (validated), or None when k_Θ is fixed."""
    if kernel_theta_params is None:
        return None
    if lam != "auto":
        raise ValueError(
            f"kernel_theta_params={kernel_theta_params!r} needs lam='auto' (both are chosen on the same held-out rows)"
        )
    if isinstance(kernel_theta_params, str):
        check_choice(kernel_theta_params, "kernel_theta_params", {"auto"})
        return [float(kernel_theta.gamma)]
    grid = [check_real(v, "kernel_theta_params[i]", low=0, low_open=True) for v in kernel_theta_params]
    if not grid:
        raise ValueError("kernel_theta_params must hold at least one value")
    return grid


def _settings(**kw) -> dict:
    """The settings a checkpoint must agree with to be resumed (everything that changes the result but P and the
    random state, which the checkpoint records apart)."""
    return {k: v for k, v in kw.items()}


def fit_rff(
    data,
    *,
    loss: Loss | None = None,
    kernel_x: Kernel | None,
    kernel_theta: Kernel,
    lam: float | str,
    lams=RFF_DEFAULTS["lams"],
    loss_params=RFF_DEFAULTS["loss_params"],
    kernel_theta_params=RFF_DEFAULTS["kernel_theta_params"],
    holdout: int = RFF_DEFAULTS["holdout"],
    selection_rows: int | None = RFF_DEFAULTS["selection_rows"],
    n_features_x: int = RFF_DEFAULTS["n_features_x"],
    input_features: str = RFF_DEFAULTS["input_features"],
    output_features: str = RFF_DEFAULTS["output_features"],
    n_features_theta: int | None = RFF_DEFAULTS["n_features_theta"],
    output_rank_tol: float = RFF_DEFAULTS["output_rank_tol"],
    batch_size: int = RFF_DEFAULTS["batch_size"],
    n_epochs: float = RFF_DEFAULTS["n_epochs"],
    max_steps: int | None = None,
    n_theta_samples: int | None = None,
    level_sampling: str | None = None,
    offset=None,
    lam_nc: float = 0.0,
    init_shift: np.ndarray | None = None,
    step_size: float | str = "auto",
    step_decay: float = 0.0,
    step_offset: float | None = None,
    average_start: int | str = "auto",
    local_steps: int | None = None,
    n_partitions: int | None = None,
    init: str = RFF_DEFAULTS["init"],
    init_max_rows: int | None = RFF_DEFAULTS["init_max_rows"],
    init_reweight: int = RFF_DEFAULTS["init_reweight"],
    rff_method: str = RFF_DEFAULTS["rff_method"],
    tol: float = RFF_DEFAULTS["tol"],
    max_passes: int = RFF_DEFAULTS["max_passes"],
    precondition_rank: int = RFF_DEFAULTS["precondition_rank"],
    dtype: str | None = RFF_DEFAULTS["dtype"],
    feature_cache: int = RFF_DEFAULTS["feature_cache"],
    random_state=None,
    executor=None,
    checkpoint=None,
    resume: bool = False,
    verbose: int = 0,
) -> RFFResult:
    """Fit the random-feature model (P_rf) of MATH.md §5 (see the module docstring for the route).

    Square loss (``rff_method="auto"``): the one-pass closed form, exact for (P_rf); if outputs are missing it is
    computed on filled outputs (MATH.md §3.3) and DSGD, which masks them, finishes the fit. Other losses (or
    ``rff_method="sgd"``): rounds of local DSGD from the square-loss closed form on about ``init_max_rows`` rows
    spread over the data (``init="closed_form"``, refined by reweighted closed forms) or from zero.

    Parameters
    ----------
    data : chunked dataset (:mod:`rffor.chunked`: a Zarr :class:`rffor.data.Dataset`, an ArrayData) or a tuple
        ``(X, Y[, theta])`` of arrays of shapes (n, d), (n, m), (m,).
    loss : Loss, default Square()
    kernel_x : Kernel or None
        k_X; None: the Gaussian kernel of the median heuristic (:func:`rffor.kernels.median_heuristic`) on up to
        1000 rows drawn uniformly from all rows (read by the partition tasks, as Nyström centres are); the kernel
        used is ``RFFResult.kernel_x``.
    kernel_theta : Kernel
    lam : float or "auto"
        λ > 0, or "auto": chosen on held-out rows (:mod:`rffor.solvers.selection`: the grid ``lams`` in closed
        form, then a walk past its best value, every candidate of a robust loss fitted by MM passes warm-started
        at its neighbour's model), then fitted on all rows. Not with ``rff_method="sgd"``.
    lams : sequence of float, optional
        The starting grid of ``lam="auto"`` (default :data:`rffor.solvers.selection.DEFAULT_LAMS`, 1e-2 … 1e-12;
        the walk continues past its ends).
    loss_params : None, "auto" or sequence of float, default None
        With ``lam="auto"``: also choose the loss's κ or ε (:attr:`rffor.losses.Loss.param_name`) on the same
        held-out rows, walking from the loss's own value ("auto": by half decades; a sequence: along its values,
        continued past its ends). The chosen loss is ``RFFResult.loss``.
    kernel_theta_params : None, "auto" or sequence of float, default None
        With ``lam="auto"``: also choose the γ of the output kernel k_Θ on the same held-out rows, walking from
        ``kernel_theta.gamma`` ("auto": by half decades; a sequence of γ values: along them, continued past its
        ends). Every γ tried has its own output factor; the input features, their cached blocks and the sums of
        the raw outputs serve them all (:mod:`rffor.solvers.selection`). The chosen kernel is
        ``RFFResult.kernel_theta``.
    holdout : int, default 10
        ``lam="auto"``: about one row in ``holdout`` is held out to score the grid (:class:`rffor.chunked.RowSplit`).
    selection_rows : int or None, default 200000
        ``lam="auto"`` on more rows than this: the selection runs on the rows of whole chunks spread evenly over the
        data, about this many (:func:`init_chunks`; their training and held-out rows), and the selected λ is scaled
        by the ratio of those rows to all rows for the fit on all rows (the ridge penalty of a finite-dimensional
        model is worth the same against ``n`` times the average loss: λ·n constant). Each selection pass then
        costs the same whatever n; the fit on all rows starts from the selected model. A robust loss's MM passes on
        all rows then use the feature covariance of the selection's rows as their metric (no pass of sums over all
        rows; :class:`~rffor.solvers.mm.MMRun` doubles the metric where such a sample fails to bound J), the square
        loss a closed form from one more pass of sums over all rows. None: select on all rows.
    n_features_x : int, default 1000
        D_x (even) for random features; the number of centres M for Nyström (D_x = M:
        :class:`~rffor.features.NystromFeatures` keeps every direction of the centres' span).
    input_features : {"auto", "rff", "orf", "nystrom"}, default "auto"
        φ_X: random Fourier features (Rahimi & Recht), orthogonal random features (Yu et al. 2016, Gaussian
        kernel), or the Nyström map on M centres drawn uniformly from the training rows (:func:`sample_centres`,
        read by the partition tasks; FALKON's uniform centres). Nyström adapts to the inputs: on curve data near
        a low-dimensional set it is far more accurate per feature (benchmarks/learning_curve.py: 10^3 to 10^4
        times lower test error than random features at the same D_x). "auto": Nyström for the full-batch routes
        (closed form and MM passes, whose features are computed once and cached), random Fourier features for
        ``rff_method="sgd"``, whose steps compute the features of every minibatch again (Nyström costs M·(d + M)
        per row, random features D·d).
    output_features : {"exact", "rff"}, default "exact"
    n_features_theta : int or None
        D_θ for ``output_features="rff"`` (default 200).
    output_rank_tol : float, default 1e-15
        Exact factor: keep eigenvalues of K_Θ above ``tol · t_max``
        (:data:`rffor.features.DEFAULT_OUTPUT_RANK_TOL` says why so low).
    batch_size : int, default 256
    n_epochs : float, default 10
        Passes over the data (per partition: ``ceil(n_epochs · E)`` steps with E the steps of an epoch of the
        largest partition).
    max_steps : int or None
        Cap on the steps per partition.
    n_theta_samples : int or None
        s, levels sampled per step, integral losses only: grid columns (None: all observed), or with
        ``level_sampling`` levels drawn from μ (None: 8). A step then costs O(b·s·D_θ) instead of O(b·m·D_θ).
    level_sampling : {"uniform", "sobol", "gauss-legendre", "grid"} or None, default None
        Scalar targets seen as constant curves (``data`` a :class:`rffor.chunked.ExpandedTargets`): DSGD steps draw
        their levels from μ anywhere in [0, 1] (:class:`rffor.solvers.dsgd.LevelSampler`) and read the scalar
        targets; the warm start and MM passes use the grid of ``data``. "grid": s of the grid's levels per step
        (joint quantile regression at given levels), with the non-crossing penalty available there too. None:
        grid columns (``n_theta_samples``), no penalty.
    offset : NormalOffset or None
        With ``level_sampling``: the intercept curve b of the targets ``y − b(θ)`` (and b' for the penalty).
    lam_nc : float, default 0
        λ_nc of the non-crossing penalty at the step's levels (``level_sampling`` and DSGD only).
    init_shift : ndarray of shape (m,), optional
        The closed-form warm start fits ``Y + init_shift`` (quantile functions: ``b(θ_j) − b(½)``, so that the start
        is the marginal quantile function shifted by the conditional location, not a flat curve at the mean).
    step_size : float or "auto", default "auto"
        η₀; "auto" is :func:`auto_step_size` (divided by ``max(1, trace/b)`` when preconditioned).
    step_decay, step_offset : float
        Schedule ``η_t = η₀ / (1 + t/t₀)^step_decay`` (t₀ = step_offset, default ``1/(η₀ λ)``); the default 0 is a
        constant step, which with suffix averaging converged fastest in our measurements.
    average_start : int or "auto", default "auto"
        Step from which the iterates are averaged; "auto": half the planned steps (suffix averaging, Rakhlin et
        al. 2012), which forgets the start-up transient.
    local_steps : int or None
        K, steps per round between averages (default: one epoch of the largest partition).
    n_partitions : int or None
        P (default: the executor's: 1 in process, the worker threads on Dask; the checkpoint's when resuming).
    init : {"closed_form", "zeros"}, default "closed_form"
    init_max_rows : int, default 50000
        Rows of the closed-form warm start of a non-square loss and of the preconditioner's covariance (their cost
        grows as rows × D_x²), in whole chunks spread evenly over the data (:func:`init_chunks`).
    init_reweight : int, default 10
        Losses offering IRLS weights (the Huber losses) with ``init="closed_form"``: at most this many reweighted
        closed forms refine the warm start on the same rows (:func:`reweighted_closed_form`). 0: start from the
        square-loss closed form.
    rff_method : {"auto", "closed_form", "mm", "sgd"}, default "auto"
        "closed_form": square loss only, the filled-output closed form without DSGD. "mm": full-batch
        majorize–minimize passes from the square-loss closed form (what "auto" runs for every other loss). "sgd":
        rounds of DSGD (below).
    tol : float, default 1e-6
        MM passes (the final fit's and the selection's candidates'): stop when the bound promises a decrease of the
        objective below ``tol`` × J.
    max_passes : int, default 300
        MM: at most this many passes over the data; stopping there warns (ConvergenceWarning). A converged fit
        stops long before (1 to 4 passes from the selected candidate in benchmarks/learning_curve.py); a cold
        start at small κ and λ needs more (benchmarks/robustness.py, κ down to 4e-4, λ to 1e-14: median 55, at
        most 234).
    precondition_rank : int, default 50
        k > 0: precondition the DSGD steps by ``(C_X + λI)^{-1}`` on the top k eigenvectors of the input feature
        covariance C_X of the warm-start rows (:class:`rffor.solvers.dsgd.Preconditioner`). 0: plain DSGD.
    dtype : {"float32", "float64"} or None, default None
        Type of the features and of B. None: float32 for random features (7x faster sines and cosines, as
        accurate at their error level), float64 for Nyström (its whitening ``s̃^{-1/2}`` amplifies rounding by up
        to ``1/sqrt(1e-14)``, and float32 supports only a floor of about 1e-6 of the largest eigenvalue; measured
        with a truncating map on benchmarks/learning_curve.py's curves: rank 430 vs 740 of M = 1000 and a 20x
        lower test error in float64).
    feature_cache : int, default 2**32
        Bytes of input features each process running the passes (this one, or every Dask worker) keeps between
        passes (:mod:`rffor.solvers.feature_cache`); blocks past the budget are recomputed every pass. 0: none.
        Changes the time, never the result.
    random_state : int, Generator or None
    executor : executor, optional
        Where the passes run (:mod:`rffor.executor`); default :class:`~rffor.executor.SerialExecutor`.
    checkpoint : str or os.PathLike, optional
        Written atomically after every round of DSGD (:mod:`rffor.checkpoint`); a closed-form-only fit has no
        rounds and writes none. A failed fit leaves the last good one.
    resume : bool, default False
        Continue from ``checkpoint`` if the file exists (after checking it belongs to this fit: data shape and
        grid, settings, P, random state); the result equals the uninterrupted fit bit for bit.
    verbose : int, default 0
        > 0: where it runs, what each phase does on how many rows, and per-round progress, on stderr.

    Returns
    -------
    RFFResult

    Raises
    ------
    rffor.executor.SchedulerLostError
        The Dask scheduler was lost: the message says which round the checkpoint holds and how to resume.
    """
    loss = Square() if loss is None else loss
    if not isinstance(loss, Loss):
        raise TypeError(f"loss must be an rffor.losses.Loss, got {loss!r}")
    if isinstance(lam, str):
        check_choice(lam, "lam", {"auto"})
        if rff_method == "sgd":
            raise ValueError(
                "lam='auto' selects λ with closed forms and MM passes; it needs rff_method 'auto', 'mm' "
                "or 'closed_form', not 'sgd'"
            )
        lams = DEFAULT_LAMS if lams is None else tuple(check_real(v, "lams[i]", low=0, low_open=True) for v in lams)
        if len(lams) < 2:
            raise ValueError(f"lams must hold at least 2 values for lam='auto', got {len(lams)}")
        check_int(holdout, "holdout", 2)
        if selection_rows is not None:
            check_int(selection_rows, "selection_rows", 1)
    else:
        lam = check_real(lam, "lam", low=0, low_open=True)
    params = _loss_param_grid(loss_params, loss, lam)
    gammas = _kernel_param_grid(kernel_theta_params, kernel_theta, lam)
    check_choice(output_features, "output_features", {"exact", "rff"})
    check_choice(input_features, "input_features", {"auto", "rff", "orf", "nystrom"})
    if input_features == "auto":
        input_features = "rff" if _method(rff_method, loss, level_sampling is not None) == "sgd" else "nystrom"
    check_choice(init, "init", {"closed_form", "zeros"})
    check_choice(rff_method, "rff_method", {"auto", "closed_form", "mm", "sgd"})
    dtype = check_dtype(("float64" if input_features == "nystrom" else "float32") if dtype is None else dtype).name
    if rff_method == "closed_form" and not loss.is_square:
        raise ValueError(f"rff_method='closed_form' is for the square loss only, got {loss!r}")
    check_real(n_epochs, "n_epochs", low=0, low_open=True)
    for name, value in (("max_steps", max_steps), ("local_steps", local_steps), ("n_partitions", n_partitions)):
        if value is not None:
            check_int(value, name, 1)
    if step_size != "auto":
        check_real(step_size, "step_size", low=0, low_open=True)
    check_int(precondition_rank, "precondition_rank", 0)
    check_int(feature_cache, "feature_cache", 0)
    check_int(init_reweight, "init_reweight", 0)
    if init_max_rows is not None:
        check_int(init_max_rows, "init_max_rows", 1)
    check_real(tol, "tol", low=0)
    check_int(max_passes, "max_passes", 1)
    if average_start != "auto":
        check_int(average_start, "average_start", 0)
    check_real(lam_nc, "lam_nc", low=0)
    if level_sampling is not None:
        from ..levels import LEVEL_SAMPLING

        check_choice(level_sampling, "level_sampling", {"grid", *LEVEL_SAMPLING})
        if level_sampling != "grid" and not hasattr(data, "base"):
            raise ValueError(
                "level_sampling draws levels anywhere in [0, 1]: data must be scalar targets seen on a grid "
                "(rffor.chunked.ExpandedTargets)"
            )
        if rff_method not in ("auto", "sgd"):
            raise ValueError(f"level_sampling is for the DSGD steps (rff_method 'sgd' or 'auto'), got {rff_method!r}")
    if lam_nc > 0 and (level_sampling is None or rff_method == "mm"):
        raise ValueError("the non-crossing penalty of the random-feature path needs DSGD with level_sampling")
    if resume and checkpoint is None:
        raise ValueError("resume=True needs checkpoint= (the path of the checkpoint to continue from)")

    data = as_data(data)
    progress = Progress(verbose)
    saved = ckpt_io.load(checkpoint) if resume and _exists(checkpoint) else None
    if saved is not None:
        rs = int(saved.info.get("random_state"))
        if random_state is not None and not (isinstance(random_state, int) and int(random_state) == rs):
            raise ValueError(
                f"random_state={random_state!r} differs from the checkpoint's random_state={rs}; pass "
                f"random_state={rs} (or None) to resume, or resume=False to start over"
            )
        n_partitions = n_partitions or saved.info.get("n_partitions")
    else:
        rs = check_seed(random_state)
    settings = _settings(
        loss=loss, kernel_x=kernel_x, kernel_theta=kernel_theta, lam=lam, n_features_x=n_features_x,
        input_features=input_features, lams=list(lams) if lam == "auto" else None, loss_params=params,
        kernel_theta_params=gammas,
        holdout=holdout if lam == "auto" else None, selection_rows=selection_rows if lam == "auto" else None,
        output_features=output_features, n_features_theta=n_features_theta, output_rank_tol=output_rank_tol,
        batch_size=batch_size, n_epochs=n_epochs, max_steps=max_steps, n_theta_samples=n_theta_samples,
        level_sampling=level_sampling, lam_nc=lam_nc, offset=offset,
        init_shift=None if init_shift is None else np.asarray(init_shift, dtype=np.float64),
        step_size=step_size, step_decay=step_decay, step_offset=step_offset, average_start=average_start,
        local_steps=local_steps, init=init, init_max_rows=init_max_rows, init_reweight=init_reweight,
        rff_method=rff_method, precondition_rank=precondition_rank, dtype=dtype, tol=tol, max_passes=max_passes,
    )  # fmt: skip

    if executor is None:
        from ..executor import SerialExecutor

        executor = SerialExecutor()
    if hasattr(executor, "progress") and executor.progress is None:
        executor.progress = progress
    try:
        with executor.open(data, n_partitions) as run:
            P = len(run.partitions)
            info = {
                "random_state": rs,
                "n_partitions": int(n_partitions or P),
                "fingerprint": ckpt_io.fingerprint(data, settings, int(n_partitions or P), rs),
            }
            if saved is not None:
                ckpt_io.verify(saved, info["fingerprint"], checkpoint)
            progress.message(
                f"random-feature fit on {run.description}: {data.n} curves in {data.n_chunks} chunk(s), "
                f"P = {P} partition(s)"
            )
            if kernel_x is None:
                tic = time.perf_counter()
                rows = sample_centres(run, data, MEDIAN_HEURISTIC_ROWS, (rs, 3))
                kernel_x = median_heuristic(rows)
                progress.message(
                    f"k_X: {kernel_x!r} by the median heuristic on {len(rows)} rows drawn uniformly from the "
                    f"{data.n} rows ({time.perf_counter() - tic:.1f} s)"
                )
            centres = None
            if input_features == "nystrom":
                tic = time.perf_counter()
                centres = sample_centres(run, data, n_features_x, (rs, 2))
                progress.message(
                    f"Nyström: {len(centres)} centres drawn uniformly from the {data.n} rows, read by the partition "
                    f"tasks ({time.perf_counter() - tic:.1f} s)"
                )
            theta = np.asarray(data.theta, dtype=np.float64)
            phi_x = make_input_features(
                data.d, rs, kernel_x=kernel_x, n_features_x=n_features_x, input_features=input_features,
                centres=centres, dtype=dtype,
            )  # fmt: skip

            def output_map(kernel):
                return make_output_map(
                    kernel, theta, rs, output_features=output_features, n_features_theta=n_features_theta,
                    output_rank_tol=output_rank_tol, dtype=dtype,
                )  # fmt: skip

            output = output_map(kernel_theta)
            result = dict(input_features=phi_x, theta=theta, random_state=rs, kernel_x=kernel_x)
            # a fresh cache key per fit: the first block a process computes under it drops the previous fit's
            fit_maps = FitMaps(phi_x, output.Phi_theta, cache_key=uuid.uuid4().hex, cache_bytes=feature_cache)
            maps = run.share(fit_maps)

            def output_at(gamma):
                """The output side of k_Θ with another γ, and the fit's maps with its Φ_Θ shared with the session
                (the same cache key: the workers' cached input features serve every output side)."""
                out = output_map(replace(kernel_theta, gamma=float(gamma)))
                return out, run.share(replace(fit_maps, Phi_theta=out.Phi_theta))

            out = _fit(
                run, data, maps, output, loss, lam, P, settings, saved, checkpoint, info, progress, result, output_at
            )
            if feature_cache > 0:  # the workers drop this fit's features (memory for what comes next)
                run.map(release_task, maps, label="release the feature cache")
            return out
    finally:
        progress.close()


def _exists(path) -> bool:
    import os

    return os.path.exists(os.fspath(path))


def _method(rff_method: str, loss: Loss, sampled: bool = False) -> str:
    """What "auto" means: DSGD when levels are drawn from μ (``level_sampling``), else the closed form for the
    square loss (MM finishes it if outputs are missing) and MM passes for every other loss."""
    if rff_method != "auto":
        return rff_method
    if sampled:
        return "sgd"
    return "closed_form" if loss.is_square else "mm"


class _Tracker:
    """The driver's record of completed rounds or passes: history, checkpoint after each, progress."""

    def __init__(self, checkpoint, info: dict, progress: Progress, history: list[dict], unit: str):
        self.checkpoint, self.info, self.progress, self.history, self.unit = checkpoint, info, progress, history, unit
        self.done = -1
        self.total = 0
        self.tic = time.perf_counter()

    def start(self, total: int, first: int) -> None:
        self.total, self.done = total, first - 1
        self.progress.start_rounds(total, unit=self.unit)

    def completed(self, r: int, state: SGDState, record: dict) -> None:
        self.history.append(record)
        if self.checkpoint is not None:
            ckpt_io.save(self.checkpoint, state, r, self.history, self.info)
        self.done = r
        self.progress.round_done(record, time.perf_counter() - self.tic)

    def lost_scheduler(self, exc: BaseException) -> BaseException:
        """The error to raise when the scheduler was lost: what the checkpoint holds and how to resume."""
        from ..executor import SchedulerLostError

        unit = self.unit
        if self.checkpoint is None:
            held = "no checkpoint was written: pass checkpoint= to be able to resume"
        elif self.done >= 0:
            held = (
                f"the checkpoint {str(self.checkpoint)!r} holds {unit} {self.done + 1}/{self.total}: restart the "
                "scheduler and its workers, then fit again with resume=True (command line: the same command with "
                "--resume)"
            )
        else:
            held = f"no {unit} was completed, the checkpoint {str(self.checkpoint)!r} was not written"
        where = f"in {unit} {self.done + 2}/{self.total}" if self.total else "before the first " + unit
        return SchedulerLostError(f"{exc}. The fit stopped {where}; {held}")


def _fit(run, data, maps, output, loss, lam, P, s, saved, checkpoint, info, progress, result, output_at):
    """The phases of :func:`fit_rff` inside an executor session (``s``: the settings; ``maps``: the FitMaps shared
    with the session, whose Φ_Θ is that of ``output``, the OutputMap of k_Θ; ``output_at(γ)``: the output side and
    shared maps of k_Θ with another γ); returns an RFFResult."""
    from ..executor import SchedulerLostError

    dtype, m = s["dtype"], data.m
    from ..chunked import RowSplit

    # with lam="auto" every pass reads the rows side by side of the selection's split, so that the refit on all
    # rows reuses the features its passes cached (and a resumed refit makes the same sums)
    split = RowSplit(s["holdout"], True) if lam == "auto" else None
    method = _method(s["rff_method"], loss, s["level_sampling"] is not None)
    unit = "pass" if method in ("mm", "closed_form") else "round"
    history: list[dict] = [] if saved is None else list(saved.history)
    tracker = _Tracker(checkpoint, info, progress, history, unit)
    rows = s["init_max_rows"] or (data.n if method in ("mm", "closed_form") else 50_000)
    metric_chunks = init_chunks(data, rows)  # the rows of the MM metric or preconditioner when computed apart
    try:
        sums, B0, start = None, None, 0
        if lam == "auto":
            rows_cap = s["selection_rows"]
            chunks = None if rows_cap is None or data.n <= rows_cap else init_chunks(data, rows_cap)
            if not loss.is_square:
                # the MM metric of the fit on all rows: the covariance of the selection's rows (all rows, or a
                # sample spread over the data: MMRun doubles the metric where it fails to bound J), which is what
                # the uninterrupted fit uses and so what a resumed fit must compute too
                metric_chunks = chunks
            if saved is not None:
                lam = float(saved.info["lam"])
                if saved.info.get("loss_param") is not None:
                    loss = loss.with_param(saved.info["loss_param"])
                gamma = saved.info.get("gamma_theta")
                if gamma is not None and float(gamma) != float(output.kernel.gamma):
                    output, maps = output_at(float(gamma))
            else:
                sel = select_hyperparameters(
                    run, maps, output, loss, s["lams"], params=s["loss_params"], gammas=s["kernel_theta_params"],
                    output_at=output_at, m=m, split=split, tol=s["tol"], max_passes=s["max_passes"], chunks=chunks,
                    progress=progress,
                )  # fmt: skip
                lam, B0, output, maps = sel.lam, sel.coef, sel.output, sel.maps
                if sel.param is not None:
                    loss = loss.with_param(sel.param)
                result["path"] = sel
                if chunks is None or not loss.is_square:  # the selection's rows: all of them, or the MM metric's
                    sums = (sel.sums.train + sel.sums.held).project(output.Phi_theta)
                else:  # the closed form on all rows, both sides of the split (the selection's cached features reused)
                    tic = time.perf_counter()
                    sums = _sums(run, maps, output, split, "closed form sums (all rows)")
                    progress.message(
                        f"feature sums of all {sums.n} curves computed by the partition tasks "
                        f"({time.perf_counter() - tic:.1f} s)"
                    )
                if chunks is not None:
                    lam = float(f"{sel.lam * sel.n_train / data.n:.6g}")
                    progress.message(
                        f"selection ran on {sel.n_train + sel.n_held} curves of {len(chunks)} of {data.n_chunks} "
                        f"chunks; λ = {sel.lam:.0e} scaled by {sel.n_train} / {data.n} curves to λ = {lam:.3g} for "
                        "all of them (λ·n constant)"
                        + ("" if loss.is_square else "; the MM metric is their feature covariance")
                    )
                progress.message(f"now fitting the selected model on all {data.n} curves")
            info["lam"] = lam
            info["loss_param"] = None if loss.param_name is None else float(getattr(loss, loss.param_name))
            info["gamma_theta"] = float(output.kernel.gamma)
        Phi_theta, C_theta = output.Phi_theta, output.C_theta
        result.update(lam=lam, loss=loss, output_features=output.features, kernel_theta=output.kernel)
        if saved is not None:
            B0, start = saved.state, saved.round + 1
            progress.message(f"resuming from {str(checkpoint)!r} after {unit} {saved.round + 1}")
        elif loss.is_square and method in ("closed_form", "mm"):
            tic = time.perf_counter()
            if sums is None:
                sums = _sums(run, maps, output, split, "closed form")
            B0 = closed_form_from_sums(sums, C_theta, lam, m)
            J0 = square_objective_from_sums(sums, B0, C_theta, lam, m)
            seconds = time.perf_counter() - tic
            history.append(
                {
                    "round": -1,
                    "t": 0,
                    "steps": 0,
                    "loss": J0 - 0.5 * lam * float(np.sum(B0 * B0)),
                    "objective": J0,
                    "seconds": seconds,
                    "samples_per_s": sums.n / seconds if seconds > 0 else float("nan"),
                }
            )
            progress.message(
                f"closed form: feature sums over all {sums.n} curves computed by {P} partition task(s) where the "
                f"data is, solved on the driver; objective {J0:.6g}"
                + (" (on filled outputs)" if sums.n_missing else "")
                + f" ({seconds:.1f} s)"
            )
            if s["rff_method"] == "closed_form" or sums.n_missing == 0:
                return RFFResult(
                    coef=B0.astype(dtype), n_iter=0, history=history, method="closed_form", n_partitions=P, **result
                )
            if method == "closed_form":  # missing outputs: MM on the masked objective finishes the fit
                method = "mm"
        elif B0 is None and s["init"] == "closed_form":
            tic = time.perf_counter()
            warm = init_chunks(data, rows)
            shift = s["init_shift"]
            sums = run.reduce(sums_task, maps, None, None, shift, chunks=warm, label="warm start")
            B0 = closed_form_from_sums(sums, C_theta, lam, m)
            reweighted = ""
            if method == "sgd" and s["init_reweight"] > 0 and loss.irls_weights(np.zeros((1, 1))) is not None:
                B0, objectives = reweighted_closed_form(
                    run, maps, C_theta, loss, lam, B0, warm, m=m, max_iter=s["init_reweight"]
                )
                reweighted = (
                    f", then {len(objectives) - 1} reweighted closed form(s) on the same curves: objective on them "
                    f"{objectives[0]:.4g} → {min(objectives):.4g}"
                )
            which = "all" if len(warm) == data.n_chunks else f"{len(warm)} of {data.n_chunks}"
            progress.message(
                f"warm start: square-loss closed form on {sums.n} curves ({which} chunks, spread over the "
                f"partitions), sums computed where the data is, solved on the driver{reweighted} "
                f"({time.perf_counter() - tic:.1f} s)"
            )
        if sums is None and (method == "mm" or s["precondition_rank"] > 0):
            # resumed, or started from zero: the feature covariance for the metric or the preconditioner
            sums = _sums(run, maps, output, split, "covariance", chunks=metric_chunks)
        if method == "mm":
            return _mm_passes(
                run, data, maps, Phi_theta, loss, lam, C_theta, P, s, B0, start, sums, tracker, result, split
            )
        return _dsgd_rounds(run, data, Phi_theta, loss, lam, C_theta, P, s, B0, start, sums, tracker, result)
    except SchedulerLostError as exc:
        raise tracker.lost_scheduler(exc) from exc


def _sums(run, maps, output, split, label: str, chunks=None) -> FeatureSums:
    """Closed-form sums over the rows of ``chunks`` (default all) in the output factor of ``output`` (the maps'),
    read side by side of ``split`` when given (the cache keys and summation order of a fit with ``lam="auto"``,
    resumed or not: the raw outputs' sums of :func:`split_sums_task`, projected)."""
    if split is None:
        return run.reduce(sums_task, maps, chunks=chunks, label=label)
    both = run.reduce(split_sums_task, maps, split, chunks=chunks, label=label)
    return (both.train + both.held).project(output.Phi_theta)


def _mm_passes(run, data, maps, Phi_theta, loss, lam, C_theta, P, s, B0, start, sums, tracker, result, split=None):
    """Full-batch majorize–minimize passes (:mod:`rffor.solvers.mm`) from B0 (a coefficient matrix, an SGDState of a
    checkpoint, or None for zero), each pass a map-reduce of the gradient where the data is (over both sides of
    ``split`` when given: :func:`~rffor.solvers.selection.both_sides_grad_task`)."""
    progress, dtype = tracker.progress, s["dtype"]
    phi_x = result["input_features"]
    tic = time.perf_counter()
    metric = SquareMetric.from_sums(sums, C_theta, lam)
    progress.message(
        f"MM metric: the square loss's Hessian from the feature covariance of {sums.n} curves (one SVD of their "
        f"{phi_x.n_features} x {phi_x.n_features} triangular factor on the driver, {time.perf_counter() - tic:.1f} s)"
    )
    if B0 is None:
        B = np.zeros((phi_x.n_features, Phi_theta.shape[1]))
    elif isinstance(B0, SGDState):
        B = np.array(B0.B_avg, dtype=np.float64)
    else:
        B = np.asarray(B0, dtype=np.float64)
    warm_coef = B.copy()
    c = float(tracker.history[-1].get("c", 1.0)) if start > 0 else 1.0
    max_passes, tol = s["max_passes"], s["tol"]
    progress.message(
        f"MM: full-batch passes over all {data.n} curves (each pass: gradient sums computed by {P} partition "
        f"task(s) where the data is, the step solved on the driver), at most {max_passes}, until the bound promises "
        f"a decrease below {tol:g} x J"
    )
    tracker.start(max_passes, start)
    timing = {}

    def gradient_pass(Bk):
        tic = time.perf_counter()
        handle = run.share(Bk)
        try:
            if split is None:
                gs = run.reduce(grad_task, maps, handle, loss, label=f"pass {timing['k'] + 1}")
            else:
                gs = run.reduce(both_sides_grad_task, split, maps, handle, loss, label=f"pass {timing['k'] + 1}")
        finally:
            run.release(handle)
        timing["seconds"] = time.perf_counter() - tic
        return gs

    # accelerated MM with restarts (MMRun); J never increases between accepted passes
    k = timing["k"] = start
    gs = gradient_pass(B)
    B_prev = np.array(B0.B, dtype=np.float64) if isinstance(B0, SGDState) else B.copy()
    t = float(tracker.history[-1].get("momentum", 1.0)) if start > 0 else 1.0
    run_ = MMRun(metric, lam, B, B_prev, gs.objective(B, lam), gs.gradient(B, lam), tol, t=t, c=c)
    if start == 0:
        record = _mm_record(k, gs, run_.J, run_.J, True, c, t, float("nan"), timing["seconds"])
        tracker.completed(k, _mm_state(B, B_prev, dtype, k + 1), record)
        k = timing["k"] = k + 1
    for Y, gs, accepted in mm_steps(run_, gradient_pass, max_passes - k):
        J_new = gs.objective(Y, lam)
        record = _mm_record(k, gs, J_new, run_.J, accepted, run_.c, run_.t, run_.decrement, timing["seconds"])
        tracker.completed(k, _mm_state(run_.B, run_.B_prev, dtype, k + 1), record)
        k = timing["k"] = k + 1
    if run_.converged:
        progress.message(
            f"MM converged: the bound promises a decrease of {run_.decrement / 2:.3g} <= {tol:g} x J = {run_.J:.6g}"
        )
    else:  # a model short of the optimum must not pass for a converged one (at small κ and λ MM needs >100 passes)
        warnings.warn(
            f"MM stopped at max_passes={max_passes} before the bound promised a decrease below tol={tol:g} x J "
            f"(J = {run_.J:.6g}); increase max_passes (the estimator's max_iter) or tol",
            ConvergenceWarning,
            stacklevel=2,
        )
    B, B_prev = run_.B, run_.B_prev
    return RFFResult(
        coef=B.astype(dtype),
        n_iter=k,
        history=tracker.history,
        method="mm",
        n_partitions=P,
        state=_mm_state(B, B_prev, dtype, k),
        warm_coef=warm_coef.astype(dtype),
        **result,
    )


def _mm_state(B: np.ndarray, B_prev: np.ndarray, dtype, passes: int) -> SGDState:
    """A checkpointable MM state: the current point (``B_avg``, float64) and the previous iterate of the momentum
    (``B``; float64, as a checkpoint stores it)."""
    return SGDState(B=np.array(B_prev, dtype=np.float64), B_avg=np.array(B, dtype=np.float64), t=int(passes))


def _mm_record(k, gs, evaluated, J, accepted, c, momentum, dec, seconds) -> dict:
    return {
        "round": k,
        "t": k + 1,
        "steps": 1,
        "loss": gs.loss / gs.n,
        "objective": J,
        "evaluated": evaluated,
        "accepted": bool(accepted),
        "c": c,
        "momentum": momentum,
        "decrement": dec,
        "seconds": seconds,
        "samples_per_s": gs.n / seconds if seconds > 0 else float("nan"),
    }


def _dsgd_rounds(run, data, Phi_theta, loss, lam, C_theta, P, s, B0, start_round, sums, tracker, result):
    """Rounds of local DSGD with periodic averaging from B0 (a coefficient matrix, an SGDState of a checkpoint, or
    None for zero)."""
    progress, dtype, m, rs = tracker.progress, s["dtype"], data.m, result["random_state"]
    phi_x = result["input_features"]
    if isinstance(B0, SGDState):
        state = B0
    elif B0 is None:
        state = SGDState.zeros(phi_x.n_features, Phi_theta.shape[1], dtype)
    else:
        state = SGDState.from_coef(B0, dtype)

    # ---- the plan of the rounds: steps, step size, preconditioner ----------------------------------------------
    batch_size = s["batch_size"]
    E = max(epoch_steps(data, part, batch_size) for part in run.partitions)
    T = math.ceil(s["n_epochs"] * E)
    if s["max_steps"] is not None:
        T = min(T, s["max_steps"])
    K = E if s["local_steps"] is None else s["local_steps"]
    round_steps = [K] * (T // K) + ([T % K] if T % K else [])
    M = s["n_theta_samples"]
    sampler = None
    if s["level_sampling"] is not None:
        sampler = LevelSampler(8 if M is None else M, s["level_sampling"], result["output_features"], s["offset"])
    subsample = sampler is not None or (M is not None and loss.integral and M < m)
    if s["step_size"] == "auto":
        eta0 = auto_step_size(C_theta, lam, subsample=subsample)
    else:
        eta0 = float(s["step_size"])
    precond = None
    if s["precondition_rank"] > 0:
        tic = time.perf_counter()
        precond = Preconditioner.from_gram(sums.xx / sums.n, lam, s["precondition_rank"], dtype)
        progress.message(
            f"preconditioner: rank {precond.rank} from the feature covariance of {sums.n} curves (eigendecomposition "
            f"of a {phi_x.n_features} x {phi_x.n_features} matrix on the driver, {time.perf_counter() - tic:.1f} s)"
        )
        if s["step_size"] == "auto":
            # preconditioned, the curvature along an eigenvector of C_X is (s ‖C_Θ‖ + λ)/(s + λ) <= max(‖C_Θ‖, 1) on
            # the full data, and a minibatch step is up to trace/b times as curved
            eta0 = min(eta0, 0.99) / max(1.0, precond.trace / batch_size)
    average_start = T // 2 if s["average_start"] == "auto" else s["average_start"]
    config = SGDConfig(
        loss=loss,
        lam=lam,
        batch_size=batch_size,
        n_theta_samples=M,
        step_size=eta0,
        step_decay=s["step_decay"],
        step_offset=s["step_offset"],
        average_start=int(average_start),
        dtype=dtype,
        precond=precond,
        sampler=sampler,
        theta=np.asarray(data.theta, dtype=np.float64),
        lam_nc=s["lam_nc"],
    )
    plan = RoundPlan(round_steps, config, phi_x, Phi_theta, rs, n_partitions=P)
    plan_h = run.share(plan)  # once: the configuration, the preconditioner and Φ_Θ do not change between rounds
    n_rounds = plan.n_rounds
    progress.message(
        f"DSGD: {n_rounds} round(s) of {K} local steps x {P} partition(s) over all {data.n} curves (each partition "
        f"steps on its own rows where the data is, then the driver averages), batch {batch_size}, "
        f"D_x = {phi_x.n_features}, D_θ = {Phi_theta.shape[1]}"
    )
    tracker.start(n_rounds, start_round)
    state = state.copy()
    for r in range(start_round, n_rounds):
        tic = time.perf_counter()
        state_h = run.share(state)
        try:
            results = run.map(round_task, plan_h, state_h, r, label=f"round {r + 1}")
        finally:
            run.release(state_h)
        state, steps, loss_sum = average_states(state, results)
        seconds = time.perf_counter() - tic
        mean_loss = loss_sum / steps if steps else float("nan")
        record = {
            "round": r,
            "t": state.t,
            "steps": steps,
            "loss": mean_loss,
            "objective": mean_loss + 0.5 * lam * float(np.sum(state.B_avg * state.B_avg)),
            "seconds": seconds,
            "samples_per_s": steps * batch_size / seconds if seconds > 0 else float("nan"),
        }
        tracker.completed(r, state, record)
    return RFFResult(
        coef=state.B_avg.astype(dtype),
        n_iter=state.t,
        history=tracker.history,
        method="sgd",
        n_partitions=P,
        state=state,
        plan=plan,
        **result,
    )
