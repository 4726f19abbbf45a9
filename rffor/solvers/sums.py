"""Closed-form sums of the random-feature model (MATH.md §5, §5.2): the map step and the reduce step of the square
loss's one-pass closed form.

Every partition reduces the triangular (TSQR) factor ``[R | Z]`` of its rows of ``[Φ_X | Y Φ_Θ]``
(:func:`feature_sums`, :func:`sums_task`; with a row split, both sides in one pass: :func:`split_sums_task`), the
factors merge by ``+`` (:class:`FeatureSums`), and the driver solves ``C_X B C_Θ + λ B = M`` from the merged
factor's singular value decomposition (:func:`closed_form_from_sums`). With a loss's IRLS weights at some B, the
same pass gives the sums of the reweighted square loss (the warm start of :mod:`rffor.solvers.warm_start`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from .._linalg import append_rows, merge_triangular
from .._validation import fill_missing
from ..chunked import RowPieces, RowSplit, row_start
from ..executor import chunkwise
from ..losses import Loss
from .mm import SquareMetric

__all__ = [
    "FeatureSums",
    "SplitSums",
    "feature_sums",
    "sums_task",
    "split_sums_task",
    "problem_sums",
    "sample_session",
    "closed_form_from_sums",
    "square_objective_from_sums",
]

#: rows of a chunk whose features are computed at once
_BLOCK_ROWS = 4096


@dataclass
class FeatureSums:
    """What the closed form needs of a set of rows (MATH.md §5, square loss), kept as a triangular factor:
    ``+`` combines two of them (the reduce step, a TSQR merge by LAPACK's triangle-pentagonal QR:
    :func:`rffor._linalg.merge_triangular`).

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
            merge_triangular(self.r, other.r),
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


def feature_sums(
    data,
    input_features,
    Phi_theta: np.ndarray,
    chunk_ids=None,
    weights: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
    maps=None,
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
        When given, features come through its feature cache (:meth:`FitMaps.block_features`), and missing outputs
        are filled by its output space's rule (default: interpolation along the data's grid, MATH.md §3.3).
    shift : ndarray of shape (m,), optional
        Sum the outputs ``Y + shift`` instead (the location-shift warm start of quantile functions,
        :func:`fit_rff`'s ``init_shift``).

    Returns
    -------
    FeatureSums
    """
    theta = np.asarray(data.theta, dtype=np.float64)
    space = getattr(maps, "space", None)
    fill = space.fill if space is not None else (lambda Y: fill_missing(Y, theta))  # the outputs' missing-value rule
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
        Y64 = fill(Y_obs) if missing else Y_obs
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
            sums.r = append_rows(sums.r, np.hstack([Phi, YP_b]))
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


@chunkwise
def sums_task(part, p: int, chunk_ids: Sequence[int], maps, B=None, loss: Loss | None = None, shift=None):
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


@dataclass
class SplitSums:
    """Closed-form sums of the two sides of a row split (``+`` adds them side by side: the reduce step)."""

    train: object
    held: object

    def __add__(self, other: SplitSums) -> SplitSums:
        return SplitSums(self.train + other.train, self.held + other.held)


@chunkwise
def split_sums_task(part, p: int, chunk_ids, maps, split: RowSplit) -> SplitSums:
    """Closed-form sums of a partition's training rows and held-out rows (both read in one pass of its chunks).

    Parameters
    ----------
    part : chunked dataset
    p : int
    chunk_ids : sequence of int
    maps : FitMaps
    split : RowSplit

    Returns
    -------
    SplitSums
        Two :class:`~rffor.solvers.sums.FeatureSums` of the raw outputs (``xy`` of shape (D_x, m)).
    """
    chunks = [(i, X, Y) for i, X, Y in part.iter_chunks([int(i) for i in chunk_ids])]
    sides = []
    for held in (False, True):
        view = split.side(held).view(_Chunks(part, chunks))
        sides.append(feature_sums(view, maps.input_features, None, [i for i, _, _ in chunks], maps=maps))
    return SplitSums(*sides)


class _Chunks:
    """Chunks already read, with the part of the chunked-data protocol a split view and feature_sums use."""

    def __init__(self, data, chunks):
        self.theta, self.m, self.d, self.chunk_rows = data.theta, data.m, data.d, data.chunk_rows
        self._chunks = chunks
        self.n_chunks = len(chunks)
        self._data = data  # what its chunk ids stand for: where their rows start, their name in caches
        self.cache_tag = getattr(data, "cache_tag", "all")

    def row_start(self, i: int) -> int:
        return row_start(self._data, i)

    def iter_chunks(self, chunk_ids=None, **_):
        yield from self._chunks


@contextlib.contextmanager
def sample_session(run, data, chunks: Sequence[int] | None) -> Iterator[tuple]:
    """Where the passes over the rows of ``chunks`` (a sample of whole chunks spread over the data, or None: all)
    run, and which chunks they select: ``(run, chunks)`` when that is every chunk; otherwise a session over
    :class:`rffor.chunked.RowPieces` of the sample (``run.over``: each of the P partitions gets an equal share of the
    sample's rows, in pieces) and None, so that every partition works in every pass, not only the few holding the
    sample. The pieces depend on the sample and P only: a pass gives the same bits on every executor, and a
    resumed fit finds the same pieces."""
    if chunks is None or len(set(int(i) for i in chunks)) == data.n_chunks:
        yield run, chunks
        return
    with run.over(RowPieces.spread(data, chunks, len(run.partitions))) as view:
        yield view, None


def problem_sums(run, problem, label: str, chunks=None) -> FeatureSums:
    """Closed-form sums of ``problem``'s rows (of ``chunks`` when given, default all) in its output factor, by one
    pass of the session ``run``: read side by side of the problem's row split when it has one (the cache keys and
    summation order of a fit with ``lam="auto"``, resumed or not: the raw outputs' sums of :func:`split_sums_task`,
    projected on Φ_Θ)."""
    if problem.split is None:
        return run.reduce(sums_task, problem.maps, chunks=chunks, label=label)
    both = run.reduce(split_sums_task, problem.maps, problem.split, chunks=chunks, label=label)
    return (both.train + both.held).project(problem.Phi_theta)
