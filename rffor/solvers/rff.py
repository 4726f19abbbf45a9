"""The random-feature solver, single process (MATH.md §5): closed form by chunk sums, and rounds of local DSGD.

Layers, from the bottom:

- :class:`ArrayData` — in-memory arrays behind the chunk interface of :class:`rffor.data.Dataset`, so that
  in-memory and out-of-core fits run the same code (and, chunked alike, give the same model bit for bit).
- :func:`feature_sums` — the map step of the square-loss closed form: per chunk ``Φ_Xᵀ Φ_X`` and
  ``Φ_Xᵀ Y Φ_Θ`` (missing outputs filled as in MATH.md §3.3); :class:`FeatureSums` add up (the reduce step).
  :func:`closed_form_from_sums` solves ``C_X B C_Θ + λ B = M``. :func:`reweighted_closed_form` refines that start
  for a Huber loss by reweighted closed forms (:func:`reweighted_sums`).
- :class:`RoundPlan` — everything one round of local SGD needs (data, partitions, steps per round, SGD
  configuration, feature maps, seed): small and picklable. ``plan.run_partition(state, round, p)`` is one
  partition task (:func:`rffor.solvers.dsgd.partition_steps` with seed ``(random_state, round, p)``).
- :func:`run_rounds` — the driver loop of periodic parameter averaging: ``map_partitions(state, round)`` returns
  one ``(SGDState, steps, loss_sum)`` per partition, in partition order; the driver averages ``B`` and ``B_avg``
  weighted by steps in that fixed order, advances ``t`` by the round's steps, records the history and calls
  ``on_round(round, state, history)`` (checkpoints).
- :func:`fit_rff` — features, closed form or warm start, then rounds. A distributed run passes its own
  ``map_partitions``: a callable ``map_partitions(plan, state, round) -> list[(SGDState, int, float)]`` that must
  return what ``[plan.run_partition(state, round, p) for p in range(plan.n_partitions)]`` returns
  (:func:`serial_map_partitions`); then P partitions on a cluster give the serial result bit for bit.
"""

from __future__ import annotations

import math
import numbers
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._validation import check_theta, check_X, check_Y, fill_missing
from ..features import ExactOutputFactor, RandomFourierFeatures, make_output_features
from ..kernels import Kernel
from ..losses import Loss, Square
from .closed_form import sylvester_features
from .dsgd import Preconditioner, SGDConfig, SGDState, chunk_rows, epoch_steps, partition_steps

__all__ = [
    "ArrayData",
    "FeatureSums",
    "feature_sums",
    "closed_form_from_sums",
    "objective",
    "predict",
    "RoundPlan",
    "serial_map_partitions",
    "run_rounds",
    "fit_rff",
    "RFFResult",
    "resolve_random_state",
    "auto_step_size",
    "make_feature_maps",
    "output_gram",
    "average_states",
    "square_objective_from_sums",
    "reweighted_sums",
    "reweighted_closed_form",
]

#: rows of a chunk whose features are computed at once by feature_sums / objective / predict
_BLOCK_ROWS = 4096
#: default rows per chunk of in-memory data (ArrayData)
DEFAULT_CHUNK_ROWS = 16384


# ---------------------------------------------------------------------------------------------------------------
# in-memory data with the Dataset interface
# ---------------------------------------------------------------------------------------------------------------


class ArrayData:
    """In-memory data with the chunk interface of :class:`rffor.data.Dataset`.

    Parameters
    ----------
    X : ndarray of shape (n, d)
    Y : ndarray of shape (n, m)
        NaN = not observed.
    theta : ndarray of shape (m,), optional
        Output grid; default ``linspace(0, 1, m)``.
    chunk_rows : int, optional
        Rows per chunk c (default 16384, capped at n). Use the chunking of a Zarr store to get the same model
        from in-memory and out-of-core fits.

    Notes
    -----
    The arrays are referenced, not copied; chunks are views (converted to the fit's dtype where used).
    """

    def __init__(self, X: np.ndarray, Y: np.ndarray, theta: np.ndarray | None = None, chunk_rows: int | None = None):
        X = np.asarray(X)
        Y = np.asarray(Y)
        if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must be 2-D with the same number of rows, got {X.shape} and {Y.shape}")
        if X.shape[0] == 0:
            raise ValueError("X and Y have no rows")
        self.X, self.Y = X, Y
        self._theta = check_theta(theta, Y.shape[1])
        if chunk_rows is None:
            chunk_rows = DEFAULT_CHUNK_ROWS
        if isinstance(chunk_rows, bool) or not isinstance(chunk_rows, numbers.Integral) or chunk_rows < 1:
            raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
        self.chunk_rows = int(min(chunk_rows, X.shape[0]))

    n = property(lambda self: int(self.X.shape[0]), doc="Number of samples.")
    d = property(lambda self: int(self.X.shape[1]), doc="Input dimension.")
    m = property(lambda self: int(self.Y.shape[1]), doc="Grid points per curve.")
    n_chunks = property(lambda self: -(-self.n // self.chunk_rows), doc="Number of row chunks.")

    @property
    def theta(self) -> np.ndarray:
        """The output grid (a copy), shape (m,)."""
        return self._theta.copy()

    def chunk_slice(self, i: int) -> slice:
        """Rows of chunk ``i``."""
        if not 0 <= i < self.n_chunks:
            raise IndexError(f"chunk id {i} out of range for {self.n_chunks} chunks")
        c = self.chunk_rows
        return slice(i * c, min((i + 1) * c, self.n))

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """``(X_i, Y_i)`` of chunk ``i``: views of shapes (rows_i, d) and (rows_i, m)."""
        sl = self.chunk_slice(int(i))
        return self.X[sl], self.Y[sl]

    def iter_chunks(self, chunk_ids: Sequence[int] | None = None, **_):
        """Yield ``(i, X_i, Y_i)`` for the given chunk ids (default all, in order)."""
        ids = range(self.n_chunks) if chunk_ids is None else chunk_ids
        for i in ids:
            yield (int(i), *self.chunk(int(i)))

    def partition(self, n_partitions: int) -> list[list[int]]:
        """Contiguous groups of chunk ids, exactly as :meth:`rffor.data.Dataset.partition`."""
        from ..data import Dataset

        return Dataset.partition(self, n_partitions)

    def __repr__(self) -> str:
        return f"ArrayData(n={self.n}, d={self.d}, m={self.m}, chunk_rows={self.chunk_rows})"


def as_data(data, theta=None, chunk_rows: int | None = None):
    """A Dataset-like object from a Dataset / ArrayData (returned as is) or a tuple ``(X, Y)`` / ``(X, Y, theta)``."""
    if isinstance(data, tuple):
        if len(data) == 2:
            X, Y = data
        elif len(data) == 3:
            X, Y, theta = data
        else:
            raise ValueError("data must be a Dataset, an ArrayData or a tuple (X, Y[, theta])")
        X = check_X(X)
        Y = check_Y(Y, n_samples=X.shape[0])
        return ArrayData(X, Y, check_theta(theta, Y.shape[1]), chunk_rows=chunk_rows)
    for attr in ("n", "d", "m", "chunk_rows", "theta", "chunk"):
        if not hasattr(data, attr):
            raise TypeError(
                f"data must be an rffor.data.Dataset, an ArrayData or a tuple (X, Y[, theta]); "
                f"{type(data).__name__} has no attribute {attr!r}"
            )
    return data


# ---------------------------------------------------------------------------------------------------------------
# closed form (square loss): map-reduce of chunk sums
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class FeatureSums:
    """Sums over rows of a set of chunks (MATH.md §5, square loss); ``+`` adds two of them (the reduce step).

    Attributes
    ----------
    xx : ndarray of shape (D_x, D_x), float64
        ``Σ_i φ_X(x_i) φ_X(x_i)ᵀ``.
    xy : ndarray of shape (D_x, D_θ), float64
        ``Σ_i φ_X(x_i) y_iᵀ Φ_Θ``, with y_i's missing entries filled (MATH.md §3.3).
    yy : float
        ``Σ_ij y_ij²`` of the filled outputs (for the objective of the closed form).
    n : int
        Rows summed.
    n_missing : int
        Missing output entries seen (filled for the sums).
    """

    xx: np.ndarray
    xy: np.ndarray
    yy: float = 0.0
    n: int = 0
    n_missing: int = 0

    def __add__(self, other: FeatureSums) -> FeatureSums:
        return FeatureSums(
            self.xx + other.xx,
            self.xy + other.xy,
            self.yy + other.yy,
            self.n + other.n,
            self.n_missing + other.n_missing,
        )

    @classmethod
    def zeros(cls, D_x: int, D_theta: int) -> FeatureSums:
        return cls(np.zeros((D_x, D_x)), np.zeros((D_x, D_theta)))


def feature_sums(
    data,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    chunk_ids=None,
    weights: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
) -> FeatureSums:
    """Map step of the closed form: the sums of :class:`FeatureSums` over some chunks.

    Features are computed in their own dtype (float32 by default) a block of rows at a time, and every block's
    products are accumulated in float64.

    Parameters
    ----------
    data : Dataset or ArrayData
    input_features : RandomFourierFeatures
        φ_X.
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid.
    chunk_ids : sequence of int, optional
        Chunks to sum over; default all.
    weights : callable ``(Phi, Y) -> w``, optional
        Row weights: called on every block with its features ``Phi`` (rows, D_x) in their dtype and its outputs
        ``Y`` (rows, m) in float64, NaN where unobserved; returns ``w`` (rows,) ≥ 0. Every row's terms are then
        multiplied by its weight (``n`` stays the number of rows). Used by :func:`reweighted_sums`.

    Returns
    -------
    FeatureSums
    """
    theta = np.asarray(data.theta, dtype=np.float64)
    dtype = input_features.dtype
    Phi_theta = np.ascontiguousarray(Phi_theta, dtype=dtype)
    sums = FeatureSums.zeros(input_features.n_features, Phi_theta.shape[1])
    ids = range(data.n_chunks) if chunk_ids is None else [int(i) for i in chunk_ids]
    chunks = data.iter_chunks(ids) if hasattr(data, "iter_chunks") else ((i, *data.chunk(i)) for i in ids)
    for _, X_i, Y_i in chunks:
        # outputs in the fit's dtype first, as DSGD sees them: in-memory float64 and stored float32 data then
        # give the same sums
        Y_obs = np.asarray(Y_i, dtype=dtype).astype(np.float64)
        missing = int(np.isnan(Y_obs).sum())
        Y64 = fill_missing(Y_obs, theta) if missing else Y_obs
        sums.n += Y64.shape[0]
        sums.n_missing += missing
        YP = Y64.astype(dtype) @ Phi_theta  # (c, D_θ)
        if weights is None:
            sums.yy += float(np.einsum("ij,ij->", Y64, Y64))
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            Phi = input_features.transform(X_i[s : s + _BLOCK_ROWS])
            YP_b = YP[s : s + _BLOCK_ROWS]
            if weights is not None:
                w = np.asarray(weights(Phi, Y_obs[s : s + _BLOCK_ROWS]), dtype=np.float64)
                Y_b = Y64[s : s + _BLOCK_ROWS]
                sums.yy += float(np.einsum("i,ij,ij->", w, Y_b, Y_b))
                # rows scaled by √w in place (Phi is this block's own array)
                root = np.sqrt(w).astype(dtype)[:, None]
                Phi *= root
                YP_b = YP_b * root
            sums.xx += Phi.T @ Phi
            sums.xy += Phi.T @ YP_b
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
        With ``C_X = xx / n`` and ``M = xy / (n m)``.
    """
    if sums.n == 0:
        raise ValueError("no rows were summed")
    return sylvester_features(sums.xx / sums.n, C_theta, sums.xy / (sums.n * m), lam)


def reweighted_sums(
    data,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    B: np.ndarray,
    loss: Loss,
    chunk_ids=None,
) -> tuple[FeatureSums, float]:
    """One pass of iteratively reweighted least squares for a Huber loss: curve weights at B and weighted sums.

    With residuals ``r_i = y_i − Φ_Θ Bᵀ φ_X(x_i)``, curve i gets the weight ``loss.irls_weights`` gives
    (:meth:`rffor.losses.Loss.irls_weights`; for H_κ^2 a majoriser touching the loss at B, so a reweighted closed
    form never increases the objective).
    The sums are those of :func:`feature_sums` with row i multiplied by ``w_i`` (``n`` stays the number of rows,
    so :func:`closed_form_from_sums` solves the weighted problem).

    Parameters
    ----------
    data : Dataset or ArrayData
    input_features : RandomFourierFeatures
    Phi_theta : ndarray of shape (m, D_θ)
    B : ndarray of shape (D_x, D_θ)
        Where the weights are taken.
    loss : Loss
    chunk_ids : sequence of int, optional
        Chunks to sum over; default all.

    Returns
    -------
    sums : FeatureSums
        Weighted sums (``yy`` weighted too).
    loss_value : float
        ``(1/n) Σ_i L(r_i)`` at B over the same rows (missing entries masked).
    """
    dtype = input_features.dtype
    # predictions in the features' dtype (a float64 copy of every block of features would double the transient
    # memory of the pass); residuals and weights in float64
    P64 = np.asarray(Phi_theta, dtype=dtype).astype(np.float64)
    BPt = (np.asarray(B, dtype=np.float64) @ P64.T).astype(dtype)  # (D_x, m)
    total = 0.0

    def weights(Phi: np.ndarray, Y: np.ndarray) -> np.ndarray:
        nonlocal total
        R = Y - Phi @ BPt  # NaN where unobserved: the losses mask them
        total += float(np.sum(loss.curve_values(R)))
        return loss.irls_weights(R)

    sums = feature_sums(data, input_features, Phi_theta, chunk_ids, weights=weights)
    return sums, total / max(sums.n, 1)


def reweighted_closed_form(
    data,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    C_theta: np.ndarray,
    loss: Loss,
    lam: float,
    B0: np.ndarray,
    chunk_ids=None,
    *,
    max_iter: int = 10,
    tol: float = 1e-3,
) -> tuple[np.ndarray, list[float]]:
    """Warm start of a Huber loss: closed forms of the reweighted square loss from B0 (iteratively reweighted
    least squares, :func:`reweighted_sums`).

    The square-loss closed form at a small λ fits the outliers, mostly along the directions of small variance of
    the input features, which DSGD moves slowest (even preconditioned, beyond its rank): started there, a robust
    fit stays near the non-robust solution for many epochs. Each reweighting costs one pass over the rows
    (``O(n D_x²)``) and one eigendecomposition of C_X; for H_κ^2 the objective decreases monotonically.

    Parameters
    ----------
    data, input_features, Phi_theta, chunk_ids
        As :func:`feature_sums`.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
    loss : Loss
    lam : float
    B0 : ndarray of shape (D_x, D_θ)
        Start (the square-loss closed form).
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
    m = np.asarray(Phi_theta).shape[0]
    B = np.asarray(B0, dtype=np.float64)
    best, best_obj, objectives = B, math.inf, []
    for it in range(max_iter + 1):
        wsums, value = reweighted_sums(data, input_features, Phi_theta, B, loss, chunk_ids)
        obj = value + 0.5 * lam * float(np.sum(B * B))
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


def square_objective_from_sums(sums: FeatureSums, B: np.ndarray, C_theta: np.ndarray, lam: float, m: int) -> float:
    """J(B) of the square loss on the filled outputs, from the sums alone (no pass over the data).

    ``J = (1/(2nm)) [Σ y² − 2 <B, xy> + <B, xx B C_Θ> m] + (λ/2)‖B‖²``.
    """
    B = np.asarray(B, dtype=np.float64)
    C_theta = np.asarray(C_theta, dtype=np.float64)
    BC = B * C_theta if C_theta.ndim == 1 else B @ C_theta
    quad = float(np.sum((sums.xx @ B) * BC)) * m
    data_term = (sums.yy - 2.0 * float(np.sum(B * sums.xy)) + quad) / (2.0 * sums.n * m)
    return data_term + 0.5 * lam * float(np.sum(B * B))


def objective(
    data,
    B: np.ndarray,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    loss: Loss,
    lam: float,
    chunk_ids=None,
) -> float:
    """The exact objective J(B) of (P_rf) by one pass over the data (missing entries masked, float64 products).

    Parameters
    ----------
    data : Dataset or ArrayData
    B : ndarray of shape (D_x, D_θ)
    input_features : RandomFourierFeatures
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
    total, n = 0.0, 0
    ids = range(data.n_chunks) if chunk_ids is None else [int(i) for i in chunk_ids]
    for i in ids:
        X_i, Y_i = data.chunk(i)
        for s in range(0, X_i.shape[0], _BLOCK_ROWS):
            Phi = input_features.transform(X_i[s : s + _BLOCK_ROWS]).astype(np.float64)
            R = np.asarray(Y_i[s : s + _BLOCK_ROWS], dtype=np.float64) - Phi @ BPt
            total += float(np.sum(loss.curve_values(R)))
            n += R.shape[0]
    return total / n + 0.5 * lam * float(np.sum(B * B))


def predict(
    coef: np.ndarray,
    input_features: RandomFourierFeatures,
    Phi_theta: np.ndarray,
    X: np.ndarray,
) -> np.ndarray:
    """``Ĥ = Φ_X(X) B Φ_Θᵀ`` (MATH.md §5), a block of rows at a time.

    Parameters
    ----------
    coef : ndarray of shape (D_x, D_θ)
    input_features : RandomFourierFeatures
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
    """Everything the rounds of local DSGD need (MATH.md §5, periodic parameter averaging); small, picklable.

    Attributes
    ----------
    data : Dataset or ArrayData
    partitions : list of list of int
        Chunk ids of each partition (P = ``len(partitions)``).
    round_steps : list of int
        K of each round: the local steps every partition runs in that round.
    config : SGDConfig
    input_features : RandomFourierFeatures
        Pickled without its frequencies (regenerated from the seed where used).
    Phi_theta : ndarray of shape (m, D_θ)
        Output features on the grid, in ``config.dtype``.
    random_state : int
        Seeds task (round r, partition p) with ``(random_state, r, p)``.
    """

    data: Any
    partitions: list[list[int]]
    round_steps: list[int]
    config: SGDConfig
    input_features: RandomFourierFeatures
    Phi_theta: np.ndarray
    random_state: int

    @property
    def n_partitions(self) -> int:
        return len(self.partitions)

    @property
    def n_rounds(self) -> int:
        return len(self.round_steps)

    def seed(self, round: int, partition: int) -> tuple[int, int, int]:
        """Seed of task (round, partition)."""
        return (self.random_state, int(round), int(partition))

    def run_partition(self, state: SGDState, round: int, partition: int) -> tuple[SGDState, int, float]:
        """One partition task of one round: :func:`partition_steps` with this plan's arguments."""
        return partition_steps(
            state,
            self.data,
            self.partitions[partition],
            self.round_steps[round],
            self.config,
            self.input_features,
            self.Phi_theta,
            self.seed(round, partition),
        )


def serial_map_partitions(plan: RoundPlan, state: SGDState, round: int) -> list[tuple[SGDState, int, float]]:
    """The in-process ``map_partitions``: every partition task of a round, one after the other."""
    return [plan.run_partition(state, round, p) for p in range(plan.n_partitions)]


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


def run_rounds(
    state: SGDState,
    map_partitions: Callable[[SGDState, int], list[tuple[SGDState, int, float]]],
    n_rounds: int,
    *,
    start_round: int = 0,
    history: list[dict] | None = None,
    lam: float = 0.0,
    batch_size: int = 1,
    on_round: Callable[[int, SGDState, list[dict]], None] | None = None,
    verbose: int = 0,
) -> tuple[SGDState, list[dict]]:
    """The driver loop of local SGD with periodic parameter averaging (MATH.md §5).

    Parameters
    ----------
    state : SGDState
        Starting state (not modified).
    map_partitions : callable ``(state, round) -> list[(SGDState, steps, loss_sum)]``
        Runs every partition's local steps from ``state``; one result per partition, in partition order.
    n_rounds : int
        Rounds ``start_round, …, n_rounds − 1`` are run.
    start_round : int, default 0
        First round (resuming from a checkpoint taken after round ``start_round − 1``).
    history : list of dict, optional
        History so far (resume); extended in place and returned.
    lam : float
        λ, for the objective estimate of the history.
    batch_size : int
        For the throughput estimate (samples ≈ steps × batch_size).
    on_round : callable ``(round, state, history)``, optional
        Called after every round with the averaged state (e.g. to write a checkpoint atomically).
    verbose : int, default 0
        Print one line per round when > 0.

    Returns
    -------
    state : SGDState
    history : list of dict
        One record per round: ``round``, ``t`` (global steps after the round), ``steps`` (over partitions),
        ``loss`` (mean minibatch loss), ``objective`` (``loss + (λ/2)‖B_avg‖²``, an estimate of J),
        ``seconds``, ``samples_per_s``.
    """
    history = [] if history is None else history
    state = state.copy()
    for r in range(start_round, n_rounds):
        tic = time.perf_counter()
        results = map_partitions(state, r)
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
        history.append(record)
        if verbose:
            print(
                f"[rffor rff] round {r + 1}/{n_rounds}: steps {state.t}, loss {mean_loss:.5g}, "
                f"objective ≈ {record['objective']:.5g}, {record['samples_per_s']:.0f} samples/s",
                flush=True,
            )
        if on_round is not None:
            on_round(r, state, history)
    return state, history


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
    input_features : RandomFourierFeatures
    output_features : ExactOutputFactor or RandomOutputFeatures
    theta : ndarray of shape (m,)
        Training grid.
    n_iter : int
        DSGD steps per partition (the global counter t; 0 for the closed form alone).
    history : list of dict
        Per-round records of :func:`run_rounds` (plus a record for the closed form, ``round = -1``).
    method : str
        "closed_form", or "sgd" (DSGD, possibly from the closed form).
    random_state : int
        The seed every random draw came from.
    state : SGDState or None
        Final DSGD state (to continue training).
    plan : RoundPlan or None
    """

    coef: np.ndarray
    input_features: RandomFourierFeatures
    output_features: Any
    theta: np.ndarray
    n_iter: int
    history: list[dict]
    method: str
    random_state: int
    state: SGDState | None = None
    plan: RoundPlan | None = field(default=None, repr=False)

    @property
    def objective_history(self) -> np.ndarray:
        """Objective (estimate) per record of ``history``."""
        return np.array([h["objective"] for h in self.history], dtype=np.float64)

    def predict(self, X: np.ndarray, theta: np.ndarray | None = None) -> np.ndarray:
        """Curves at inputs X (n, d), on the training grid or at ``theta`` (q,); returns (n, m) or (n, q)."""
        grid = self.theta if theta is None else theta
        return predict(self.coef, self.input_features, self.output_features.transform(grid), np.asarray(X))


def resolve_random_state(random_state) -> int:
    """An int seed from None (fresh OS entropy), an int, a numpy Generator or RandomState (drawn from it)."""
    if random_state is None:
        return int(np.random.SeedSequence().entropy % (2**63))
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state!r}")
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(2**31 - 1))
    raise ValueError(f"random_state must be None, an int, a numpy Generator or RandomState, got {random_state!r}")


def output_gram(output_features, Phi_theta: np.ndarray) -> np.ndarray:
    """``C_Θ = Φ_Θᵀ Φ_Θ / m`` on the grid: the exact diagonal for the exact factor, else a (D_θ, D_θ) matrix."""
    if isinstance(output_features, ExactOutputFactor):
        return output_features.C_theta
    P = np.asarray(Phi_theta, dtype=np.float64)
    return P.T @ P / P.shape[0]


def make_feature_maps(
    d: int,
    theta: np.ndarray,
    random_state: int,
    *,
    kernel_x: Kernel,
    kernel_theta: Kernel,
    n_features_x: int = 1000,
    output_features: str = "exact",
    n_features_theta: int | None = None,
    output_rank_tol: float = 1e-10,
    dtype: str = "float32",
) -> tuple[RandomFourierFeatures, Any, np.ndarray, np.ndarray]:
    """The feature maps of a fit, exactly as :func:`fit_rff` builds them (seeds ``(random_state, 0)`` for φ_X and
    ``(random_state, 1)`` for random output features).

    Returns
    -------
    phi_x : RandomFourierFeatures
    phi_theta : ExactOutputFactor or RandomOutputFeatures
    Phi_theta : ndarray of shape (m, D_θ)
        φ_Θ on the grid, in ``dtype``.
    C_theta : ndarray of shape (D_θ,) or (D_θ, D_θ)
        ``Φ_Θᵀ Φ_Θ / m`` (:func:`output_gram`).
    """
    theta = np.asarray(theta, dtype=np.float64)
    phi_x = RandomFourierFeatures(kernel_x, n_features_x, d, seed=(random_state, 0), dtype=dtype)
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
    return phi_x, phi_theta, Phi_theta, output_gram(phi_theta, Phi_theta)


def auto_step_size(C_theta: np.ndarray, lam: float, *, subsample: bool = False) -> float:
    """A stable DSGD step η₀ (MATH.md §5).

    The Hessian of a step's objective is ``(1/b) Σ_i φ_X(x_i) φ_X(x_i)ᵀ ⊗ A_i + λ I`` with ``‖φ_X‖ = 1`` and
    ``A_i = Φ_Θ,Sᵀ Φ_Θ,S / |S|`` over the entries S used for curve i (every loss is ``½‖·‖² □ g``, so its curvature
    is at most the square loss's). For whole, fully observed curves ``A_i = C_Θ``, so ``η₀ = 0.99 / (‖C_Θ‖ + λ)``
    is stable; for subsets (θ-subsampling) only ``‖A_i‖ ≤ max k_Θ(θ, θ) = 1`` holds, giving ``0.99 / (1 + λ)``.

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


def _check_choice(value, name: str, options) -> str:
    if value not in options:
        raise ValueError(f"{name} must be one of {sorted(options)}, got {value!r}")
    return value


def _init_chunks(data, max_rows: int) -> list[int]:
    """Evenly spread chunk ids holding about ``max_rows`` rows (all chunks if there are fewer rows)."""
    k = data.n_chunks
    want = min(k, max(1, -(-max_rows // data.chunk_rows)))
    return sorted(set(np.linspace(0, k - 1, want).round().astype(int).tolist()))


def fit_rff(
    data,
    *,
    loss: Loss | None = None,
    kernel_x: Kernel,
    kernel_theta: Kernel,
    lam: float,
    n_features_x: int = 1000,
    output_features: str = "exact",
    n_features_theta: int | None = None,
    output_rank_tol: float = 1e-10,
    batch_size: int = 256,
    n_epochs: float = 10,
    max_steps: int | None = None,
    n_theta_samples: int | None = None,
    step_size: float | str = "auto",
    step_decay: float = 0.0,
    step_offset: float | None = None,
    average_start: int | str = "auto",
    local_steps: int | None = None,
    n_partitions: int | None = None,
    init: str = "closed_form",
    init_max_rows: int = 50_000,
    init_reweight: int = 10,
    rff_method: str = "auto",
    precondition_rank: int = 50,
    dtype: str = "float32",
    random_state=None,
    verbose: int = 0,
    map_partitions: Callable | None = None,
    on_round: Callable | None = None,
    initial_state: SGDState | None = None,
    start_round: int = 0,
    history: list[dict] | None = None,
    initial_sums: FeatureSums | None = None,
    on_message: Callable[[str], None] | None = None,
) -> RFFResult:
    """Fit the random-feature model (P_rf) of MATH.md §5.

    Square loss (``rff_method="auto"``): the one-pass closed form, exact for (P_rf); if outputs are missing it is
    computed on filled outputs (MATH.md §3.3) and DSGD, which masks them, finishes the fit. Other losses (or
    ``rff_method="sgd"``): rounds of local DSGD (:func:`run_rounds`), from the square-loss closed form on about
    ``init_max_rows`` rows (``init="closed_form"``) or from zero.

    Parameters
    ----------
    data : Dataset, ArrayData or tuple (X, Y[, theta])
    loss : Loss, default Square()
    kernel_x, kernel_theta : Kernel
    lam : float
        λ > 0.
    n_features_x : int, default 1000
        D_x (even).
    output_features : {"exact", "rff"}, default "exact"
    n_features_theta : int or None
        D_θ for ``output_features="rff"`` (default 200).
    output_rank_tol : float, default 1e-10
        Exact factor: keep eigenvalues of K_Θ above ``tol · t_max``.
    batch_size : int, default 256
    n_epochs : float, default 10
        Passes over the data (per partition: ``ceil(n_epochs · E)`` steps with E the steps of an epoch of the
        largest partition).
    max_steps : int or None
        Cap on the steps per partition.
    n_theta_samples : int or None
        Locations sampled per curve and step, integral losses only (None: all observed).
    step_size : float or "auto", default "auto"
        η₀; "auto" is :func:`auto_step_size`: ``0.99 / (‖C_Θ‖ + λ)`` when steps use whole curves, ``0.99 / (1 + λ)``
        when integral losses subsample θ.
    step_decay, step_offset : float
        Schedule ``η_t = η₀ / (1 + t/t₀)^step_decay`` (t₀ = step_offset, default ``1/(η₀ λ)``); the default 0 is a
        constant step, which with suffix averaging converged fastest in our measurements.
    average_start : int or "auto", default "auto"
        Step from which the iterates are averaged; "auto": half the planned steps (suffix averaging, Rakhlin et
        al. 2012), which forgets the start-up transient.
    local_steps : int or None
        K, steps per round between averages (default: one epoch of the largest partition).
    n_partitions : int or None
        P (default 1).
    init : {"closed_form", "zeros"}, default "closed_form"
    init_max_rows : int, default 50000
        Rows used by the closed-form warm start of a non-square loss (its cost grows as rows × D_x²).
    init_reweight : int, default 10
        Huber losses with ``init="closed_form"``: at most this many reweighted closed forms refine the warm start
        on the same rows (:func:`reweighted_closed_form`; each costs about what the first closed form costs).
        0: start from the square-loss closed form.
    rff_method : {"auto", "closed_form", "sgd"}, default "auto"
        "closed_form": square loss only, the filled-output closed form without DSGD.
    precondition_rank : int, default 50
        k > 0: precondition the DSGD steps by ``(C_X + λI)^{-1}`` on the top k eigenvectors of the input feature
        covariance C_X, estimated on the warm-start rows (:class:`rffor.solvers.dsgd.Preconditioner`). At small
        λ plain DSGD moves the directions of small eigenvalues of C_X very slowly; preconditioned, it reaches the
        optimum in a few epochs (``benchmarks/preconditioning.py``). Costs ``4 D_x k D_θ`` flops per step and one
        eigendecomposition of a (D_x, D_x) matrix. 0: plain DSGD.
    dtype : {"float32", "float64"}, default "float32"
    random_state : int, Generator or None
    verbose : int, default 0
    map_partitions : callable ``(plan, state, round) -> list[(SGDState, steps, loss_sum)]``, optional
        Runs a round's partition tasks (default :func:`serial_map_partitions`); must return what the serial one
        returns, e.g. by running ``plan.run_partition(state, round, p)`` on Dask workers.
    on_round : callable ``(round, state, history)``, optional
        Called after every round (checkpoints).
    initial_state, start_round, history : optional
        Resume from a checkpoint taken after round ``start_round − 1`` (skips the initialisation).
    initial_sums : FeatureSums, optional
        With ``initial_state``: the feature sums the start was computed from (e.g. by the map-reduce closed form
        on a cluster), reused for the preconditioner instead of a second pass over the warm-start rows.
    on_message : callable ``(text)``, optional
        Receives the one-line reports of the warm start and the preconditioner (which run on the driver and can
        take a while on large data) instead of ``verbose`` printing them; ``rffor.distributed.fit`` passes its
        progress reporter.

    Returns
    -------
    RFFResult
    """
    loss = Square() if loss is None else loss
    if not isinstance(loss, Loss):
        raise TypeError(f"loss must be an rffor.losses.Loss, got {loss!r}")
    if isinstance(lam, bool) or not isinstance(lam, numbers.Real) or not (math.isfinite(lam) and lam > 0):
        raise ValueError(f"lam must be a finite number > 0, got {lam!r}")
    _check_choice(output_features, "output_features", {"exact", "rff"})
    _check_choice(init, "init", {"closed_form", "zeros"})
    _check_choice(rff_method, "rff_method", {"auto", "closed_form", "sgd"})
    try:
        dtype = np.dtype(dtype).name
    except TypeError:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}") from None
    _check_choice(dtype, "dtype", {"float32", "float64"})
    if rff_method == "closed_form" and not isinstance(loss, Square):
        raise ValueError(f"rff_method='closed_form' is for the square loss only, got {loss!r}")
    if not (isinstance(n_epochs, numbers.Real) and not isinstance(n_epochs, bool) and n_epochs > 0):
        raise ValueError(f"n_epochs must be a number > 0, got {n_epochs!r}")
    for name, value in (("max_steps", max_steps), ("local_steps", local_steps), ("n_partitions", n_partitions)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1):
            raise ValueError(f"{name} must be a positive integer or None, got {value!r}")
    if step_size != "auto" and (
        isinstance(step_size, bool) or not isinstance(step_size, numbers.Real) or not step_size > 0
    ):
        raise ValueError(f"step_size must be a number > 0 or 'auto', got {step_size!r}")
    if (
        isinstance(precondition_rank, bool)
        or not isinstance(precondition_rank, numbers.Integral)
        or (precondition_rank < 0)
    ):
        raise ValueError(f"precondition_rank must be an integer >= 0, got {precondition_rank!r}")
    if isinstance(init_reweight, bool) or not isinstance(init_reweight, numbers.Integral) or init_reweight < 0:
        raise ValueError(f"init_reweight must be an integer >= 0, got {init_reweight!r}")
    if average_start != "auto" and (
        isinstance(average_start, bool) or not isinstance(average_start, numbers.Integral) or average_start < 0
    ):
        raise ValueError(f"average_start must be an integer >= 0 or 'auto', got {average_start!r}")

    def say(text: str) -> None:
        if on_message is not None:
            on_message(text)
        elif verbose:
            print(f"[rffor rff] {text}", flush=True)

    data = as_data(data)
    theta = np.asarray(data.theta, dtype=np.float64)
    rs = resolve_random_state(random_state)
    phi_x, phi_theta, Phi_theta, C_theta = make_feature_maps(
        data.d,
        theta,
        rs,
        kernel_x=kernel_x,
        kernel_theta=kernel_theta,
        n_features_x=n_features_x,
        output_features=output_features,
        n_features_theta=n_features_theta,
        output_rank_tol=output_rank_tol,
        dtype=dtype,
    )
    m = data.m
    history = [] if history is None else history
    is_square = isinstance(loss, Square)
    result = dict(input_features=phi_x, output_features=phi_theta, theta=theta, random_state=rs)

    # ---- closed form / warm start ------------------------------------------------------------------------
    state = initial_state
    sums = initial_sums if initial_state is not None else None
    if state is None:
        B0 = None
        if is_square and rff_method in ("auto", "closed_form"):
            tic = time.perf_counter()
            sums = feature_sums(data, phi_x, Phi_theta)
            B0 = closed_form_from_sums(sums, C_theta, lam, m)
            J0 = square_objective_from_sums(sums, B0, C_theta, lam, m)
            history.append(
                {
                    "round": -1,
                    "t": 0,
                    "steps": 0,
                    "loss": J0 - 0.5 * lam * float(np.sum(B0 * B0)),
                    "objective": J0,
                    "seconds": time.perf_counter() - tic,
                    "samples_per_s": float("nan"),
                }
            )
            if verbose:
                print(
                    f"[rffor rff] closed form on {sums.n} curves: objective {J0:.6g} ({history[-1]['seconds']:.1f} s)",
                    flush=True,
                )
            if rff_method == "closed_form" or sums.n_missing == 0:
                return RFFResult(coef=B0.astype(dtype), n_iter=0, history=history, method="closed_form", **result)
        elif init == "closed_form":
            tic = time.perf_counter()
            init_chunks = _init_chunks(data, init_max_rows)
            sums = feature_sums(data, phi_x, Phi_theta, init_chunks)
            B0 = closed_form_from_sums(sums, C_theta, lam, m)
            reweighted = ""
            if init_reweight > 0 and loss.irls_weights(np.zeros((1, 1))) is not None:
                B0, objectives = reweighted_closed_form(
                    data, phi_x, Phi_theta, C_theta, loss, float(lam), B0, init_chunks, max_iter=init_reweight
                )
                reweighted = (
                    f", {len(objectives) - 1} reweighting(s): objective {objectives[0]:.4g} → {min(objectives):.4g}"
                )
            say(f"warm start: closed form on {sums.n} curves{reweighted} ({time.perf_counter() - tic:.1f} s)")
        state = (
            SGDState.zeros(phi_x.n_features, phi_theta.n_features, dtype)
            if B0 is None
            else SGDState.from_coef(B0, dtype)
        )

    # ---- rounds of DSGD -----------------------------------------------------------------------------------
    P = 1 if n_partitions is None else n_partitions
    partitions = data.partition(P)
    E = max(epoch_steps(data, part, batch_size) for part in partitions)
    T = math.ceil(n_epochs * E)
    if max_steps is not None:
        T = min(T, max_steps)
    K = E if local_steps is None else local_steps
    round_steps = [K] * (T // K) + ([T % K] if T % K else [])
    if step_size == "auto":
        eta0 = auto_step_size(
            C_theta, lam, subsample=n_theta_samples is not None and loss.integral and n_theta_samples < m
        )
    else:
        eta0 = float(step_size)
    precond = None
    if precondition_rank > 0:
        tic = time.perf_counter()
        if sums is None:  # resumed, or started from zero: the covariance of the warm-start rows
            sums = feature_sums(data, phi_x, Phi_theta, _init_chunks(data, init_max_rows))
        precond = Preconditioner.from_gram(sums.xx / sums.n, float(lam), precondition_rank, dtype)
        say(f"preconditioner: rank {precond.rank} from {sums.n} curves ({time.perf_counter() - tic:.1f} s)")
    if precond is not None and step_size == "auto":
        # preconditioned, the curvature along an eigenvector of C_X is (s ‖C_Θ‖ + λ)/(s + λ) <= max(‖C_Θ‖, 1) on
        # the full data, and a minibatch step is up to trace/b times as curved
        eta0 = min(eta0, 0.99) / max(1.0, precond.trace / batch_size)
    if average_start == "auto":
        average_start = T // 2
    config = SGDConfig(
        loss=loss,
        lam=float(lam),
        batch_size=batch_size,
        n_theta_samples=n_theta_samples,
        step_size=eta0,
        step_decay=step_decay,
        step_offset=step_offset,
        average_start=int(average_start),
        dtype=dtype,
        precond=precond,
    )
    plan = RoundPlan(data, partitions, round_steps, config, phi_x, Phi_theta, rs)
    mapper = serial_map_partitions if map_partitions is None else map_partitions
    if verbose:
        rows = sum(chunk_rows(data, i) for part in partitions for i in part)
        print(
            f"[rffor rff] DSGD: {rows} curves, {len(partitions)} partition(s), {len(round_steps)} round(s) of "
            f"{K} steps, batch {batch_size}, D_x={phi_x.n_features}, D_θ={phi_theta.n_features}",
            flush=True,
        )
    state, history = run_rounds(
        state,
        lambda st, r: mapper(plan, st, r),
        plan.n_rounds,
        start_round=start_round,
        history=history,
        lam=float(lam),
        batch_size=batch_size,
        on_round=on_round,
        verbose=verbose,
    )
    return RFFResult(
        coef=state.B_avg.astype(dtype), n_iter=state.t, history=history, method="sgd", state=state, plan=plan, **result
    )
