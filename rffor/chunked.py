"""The chunked-data protocol: how a random-feature fit sees its training data, whatever stores it.

A fit reads its data one chunk of rows at a time, so that a store far larger than memory trains with flat memory,
and distributes it by **partitions**: contiguous groups of whole chunks (:func:`partition_chunks`). A chunked
dataset is any object with

==================  ============================================================================================
``n, d, m``         numbers of curves, input dimension, grid points per curve (ints)
``theta``           the output grid, ndarray of shape (m,), float64
``chunk_rows``      rows per chunk c (the last chunk may be shorter); ``n_chunks`` = ceil(n / c)
``chunk(i)``        ``(X_i, Y_i)`` of chunk i, arrays of shapes (rows_i, d) and (rows_i, m); NaN in Y = unobserved
``iter_chunks(ids)``  yields ``(i, X_i, Y_i)`` for the given chunk ids in order (may read ahead)
``partition(P)``    ``partition_chunks(n_chunks, P)``
``workers_can_read``  True when another process can read the chunks from a pickled copy of the object (a Zarr
                    store on a shared file system or an object store: the Dask executor then ships the small
                    description and every worker reads its own chunks); False when the data lives in this
                    process's memory (then the executor ships each partition's rows once per fit)
``subset(ids)``     (only needed when ``workers_can_read`` is False) a chunked dataset holding just those chunks,
                    under their global ids: what is shipped to the worker of a partition
``row_start(i)``    (optional) the global index of chunk i's first row; default ``i · chunk_rows``
                    (:func:`row_start`): what a :class:`RowSplit` hashes
``cache_tag``       (optional) names which rows a chunk id stands for, for caches keyed by chunk id (default
                    "all": the store's own chunks)
==================  ============================================================================================

**Row pieces.** A partition's unit of work is a chunk id of the dataset it is given. :class:`RowPieces` makes
row ranges of chunks such units: a chunked dataset whose chunks are pieces of another's chunks, grouped into P
partitions of about equal rows (:meth:`RowPieces.spread`). A pass over a sample of chunks (the curves of a
``lam="auto"`` selection, of a warm start) then runs on all P partitions instead of the few that hold those chunks;
its results depend on the sample, P and the pieces' size only, not on where the tasks ran.

Backends: :class:`ArrayData` (NumPy arrays in memory, here) and :class:`rffor.data.Dataset` (a Zarr v3 store). A new
storage backend is one new module implementing the table above; :func:`as_data` accepts it as it is.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

from ._validation import check_int, check_theta, check_X, check_Y

__all__ = [
    "ArrayData",
    "ChunkSubset",
    "ExpandedTargets",
    "RowSplit",
    "splitmix64",
    "as_data",
    "chunk_rows",
    "partition_chunks",
    "spread_chunks",
    "RowPieces",
    "row_start",
    "read_rows",
    "PIECE_ROWS",
    "PROTOCOL",
]

#: attributes every chunked dataset has (``subset`` too when ``workers_can_read`` is False)
PROTOCOL = ("n", "d", "m", "theta", "chunk_rows", "n_chunks", "chunk", "iter_chunks", "partition", "workers_can_read")

#: default rows per chunk of in-memory data (:class:`ArrayData`)
DEFAULT_CHUNK_ROWS = 16384


def partition_chunks(n_chunks: int, n_partitions: int) -> list[list[int]]:
    """Split chunk ids ``0 … n_chunks − 1`` into contiguous groups of about equal numbers of rows.

    Parameters
    ----------
    n_chunks : int
    n_partitions : int
        Number of groups P wanted (e.g. the number of workers).

    Returns
    -------
    list of list of int
        ``min(P, n_chunks)`` non-empty groups of consecutive chunk ids; together they hold every chunk exactly
        once, in order. ``r = n_chunks mod P`` groups get one chunk more than the others: the last group (it holds
        the short last chunk) and the first ``r − 1``, which minimises the largest group's rows.
    """
    if isinstance(n_partitions, (bool, np.bool_)) or not isinstance(n_partitions, (int, np.integer)):
        raise TypeError(f"n_partitions must be an int, got {type(n_partitions).__name__}")
    if n_partitions < 1:
        raise ValueError(f"n_partitions must be >= 1, got {n_partitions}")
    p = min(int(n_partitions), int(n_chunks))
    q, r = divmod(int(n_chunks), p)
    sizes = [q + 1 if j < r - 1 else q for j in range(p)]
    if r:
        sizes[-1] = q + 1
    bounds = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    return [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def spread_chunks(data, max_rows: int) -> list[int]:
    """Evenly spread chunk ids holding about ``max_rows`` rows (all chunks if there are fewer rows): the rows of a
    warm start, of a covariance or of a subsampled selection, spread over the data and so over its partitions."""
    k = data.n_chunks
    want = min(k, max(1, -(-max_rows // data.chunk_rows)))
    return sorted(set(np.linspace(0, k - 1, want).round().astype(int).tolist()))


def chunk_rows(data, i: int) -> int:
    """Number of rows of chunk ``i`` of a chunked dataset (from ``n`` and ``chunk_rows``, or the dataset's own
    ``rows_of(i)`` when its chunks differ in size (:class:`RowPieces`), no read)."""
    rows_of = getattr(data, "rows_of", None)
    if rows_of is not None:
        return int(rows_of(int(i)))
    c = data.chunk_rows
    return max(0, min(c, data.n - int(i) * c))


def row_start(data, i: int) -> int:
    """Global index of the first row of chunk ``i`` (the dataset's ``row_start(i)`` when it has one, else
    ``i · chunk_rows``)."""
    own = getattr(data, "row_start", None)
    return int(own(int(i))) if own is not None else int(i) * int(data.chunk_rows)


def _rows_task(part, p: int, chunk_ids, wanted: dict[int, np.ndarray], outputs: bool, distinct: bool) -> list:
    """The rows ``wanted[i]`` (local indices) of the inputs (or outputs) of each of the partition's chunks i, in
    chunk order; ``distinct``: the partition's distinct complete rows instead (one array, lexicographic order)."""
    blocks = [
        np.array((Y_i if outputs else X_i)[wanted[i]]) for i, X_i, Y_i in part.iter_chunks([int(i) for i in chunk_ids])
    ]
    if not distinct:
        return blocks
    R = np.concatenate(blocks)
    return [np.unique(R[~np.isnan(R).any(axis=1)], axis=0)]


def read_rows(run, data, rows: np.ndarray, *, outputs: bool = False, distinct: bool = False, label: str = "rows"):
    """Rows of the data read where the data is: by the partition tasks of an executor session (``run.map``) that
    hold them, so that a store's chunks are opened on the workers and only the rows asked for travel to the
    driver (the driver opens no chunk).

    Parameters
    ----------
    run : executor session (:mod:`rffor.executor`) over ``data``
    data : chunked dataset
    rows : ndarray of int
        Global row indices, increasing (chunk ``i`` holds rows ``i · chunk_rows …``).
    outputs : bool, default False
        Read the outputs Y (m values a row) instead of the inputs X (d values).
    distinct : bool, default False
        Return the distinct complete rows (rows with a NaN left out) in lexicographic order: each task sends its
        partition's distinct rows, the driver merges them (the result does not depend on the partitions).
    label : str
        The pass's name in the session's statistics.

    Returns
    -------
    ndarray of shape (len(rows), d or m), float64
        In the order of ``rows`` (``distinct``: at most that many rows).
    """
    rows = np.asarray(rows, dtype=np.int64)
    c = int(data.chunk_rows)
    ids = rows // c
    wanted = {int(i): rows[ids == i] - int(i) * c for i in np.unique(ids)}
    width = data.m if outputs else data.d
    parts = run.map(_rows_task, wanted, bool(outputs), bool(distinct), chunks=sorted(wanted), label=label)
    blocks = [r for part in parts if part is not None for r in part]
    out = np.concatenate(blocks).astype(np.float64) if blocks else np.empty((0, width))
    return np.unique(out, axis=0) if distinct and len(out) else out


class ArrayData:
    """In-memory arrays as a chunked dataset (``workers_can_read`` is False).

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
    The arrays are referenced, not copied, and not validated (use :func:`as_data` on raw input): chunks are views.
    """

    workers_can_read = False

    def __init__(self, X: np.ndarray, Y: np.ndarray, theta: np.ndarray | None = None, chunk_rows: int | None = None):
        X = np.asarray(X)
        Y = np.asarray(Y)
        if X.ndim != 2 or Y.ndim != 2 or X.shape[0] != Y.shape[0]:
            raise ValueError(f"X and Y must be 2-D with the same number of rows, got {X.shape} and {Y.shape}")
        if X.shape[0] == 0:
            raise ValueError("X and Y have no rows")
        self.X, self.Y = X, Y
        self._theta = check_theta(theta, Y.shape[1])
        c = DEFAULT_CHUNK_ROWS if chunk_rows is None else check_int(chunk_rows, "chunk_rows", 1)
        self.chunk_rows = int(min(c, X.shape[0]))

    n = property(lambda self: int(self.X.shape[0]), doc="Number of curves.")
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
        """:func:`partition_chunks` of this data's chunks."""
        return partition_chunks(self.n_chunks, n_partitions)

    def subset(self, chunk_ids: Sequence[int]) -> ChunkSubset:
        """The given chunks (copies of their rows) under their global ids: what is shipped to a worker."""
        return ChunkSubset(self, chunk_ids)

    def __repr__(self) -> str:
        return f"ArrayData(n={self.n}, d={self.d}, m={self.m}, chunk_rows={self.chunk_rows})"


class ChunkSubset(ArrayData):
    """Some chunks of a chunked dataset, with the interface of the whole (global chunk ids, ``n``, ``chunk_rows``).

    Reading any other chunk raises IndexError. Pickles to the size of its chunks' rows.
    """

    def __init__(self, data, chunk_ids: Sequence[int]):
        self._n, self._d, self._m = int(data.n), int(data.d), int(data.m)
        self.chunk_rows = int(data.chunk_rows)
        self._theta = np.asarray(data.theta, dtype=np.float64)
        self._chunks = {int(i): tuple(np.ascontiguousarray(a) for a in data.chunk(int(i))) for i in chunk_ids}
        # what the source's chunk ids stand for (row pieces): where their rows start, and their name in caches
        self._starts = {int(i): row_start(data, int(i)) for i in chunk_ids}
        self.cache_tag = getattr(data, "cache_tag", "all")

    n = property(lambda self: self._n)
    d = property(lambda self: self._d)
    m = property(lambda self: self._m)

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._chunks[int(i)]
        except KeyError:
            raise IndexError(f"chunk {i} is not part of this subset ({sorted(self._chunks)})") from None

    def subset(self, chunk_ids: Sequence[int]) -> ChunkSubset:
        return ChunkSubset(self, chunk_ids)

    def row_start(self, i: int) -> int:
        """Global index of chunk ``i``'s first row (as in the source dataset)."""
        try:
            return self._starts[int(i)]
        except KeyError:
            raise IndexError(f"chunk {i} is not part of this subset ({sorted(self._chunks)})") from None

    def rows_of(self, i: int) -> int:
        """Rows of chunk ``i`` (held here, or as the source's chunking says)."""
        held = self._chunks.get(int(i))
        if held is not None:
            return int(held[0].shape[0])
        c = self.chunk_rows
        return max(0, min(c, self.n - int(i) * c))

    def __repr__(self) -> str:
        return f"ChunkSubset(chunks={sorted(self._chunks)}, n={self.n}, d={self.d}, m={self.m})"


def splitmix64(g: np.ndarray) -> np.ndarray:
    """The SplitMix64 hash of unsigned 64-bit integers (Steele, Lea & Flood 2014; the seeding generator of
    xoshiro): ``z = g + 0x9E3779B97F4A7C15``, then ``z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
    z *= 0x94D049BB133111EB; z ^= z >> 31``, all modulo 2⁶⁴ (a bijection of the 64-bit integers whose output bits
    each depend on every input bit).

    Parameters
    ----------
    g : ndarray of uint64

    Returns
    -------
    ndarray of uint64, the shape of g
    """
    z = np.asarray(g, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class RowSplit:
    """A hold-out split of the rows of any chunked dataset, by a hash of each row's global index.

    Row ``g`` (``g = i · chunk_rows + local index`` in chunk i) is held out when ``splitmix64(g) mod modulus == 0``
    (:func:`splitmix64`, the finaliser of Steele, Lea & Flood's SplitMix64: every bit of the 64-bit result depends
    on every bit of g): about one row in ``modulus``, spread over every chunk and so over every partition, and the
    same whatever the chunking, partitioning or executor (the index is global). Hashing rather than
    ``g mod modulus`` keeps the split unrelated to a periodic order of the rows (e.g. two interleaved sources), for
    every modulus: a multiplicative hash ``(g · a mod 2³²) mod modulus`` with an odd a, used before, keeps g's low
    bits, so that with an even modulus (the default ``holdout=10``) only even rows were ever held out.

    Parameters
    ----------
    modulus : int
        About one row in ``modulus`` is held out (>= 2).
    held_out : bool
        Which side :meth:`view` shows: the held-out rows (True) or the others (False).
    """

    def __init__(self, modulus: int, held_out: bool):
        self.modulus = check_int(modulus, "modulus", 2)
        self.held_out = bool(held_out)

    def side(self, held_out: bool) -> RowSplit:
        """The same split showing the given side."""
        return RowSplit(self.modulus, held_out)

    def mask(self, start: int, rows: int) -> np.ndarray:
        """Boolean mask of shape (rows,): the rows ``start … start + rows − 1`` on this side."""
        h = splitmix64(np.arange(start, start + rows, dtype=np.uint64))
        return (h % np.uint64(self.modulus) == 0) == self.held_out

    def view(self, data) -> _SplitView:
        """``data`` (a chunked dataset) with only this side's rows in every chunk."""
        return _SplitView(data, self)

    def __repr__(self) -> str:
        return f"RowSplit(modulus={self.modulus}, held_out={self.held_out})"


class _SplitView:
    """One side of a :class:`RowSplit` of a chunked dataset; only ``iter_chunks`` and ``chunk`` filter rows (a task
    wraps the data it received, so nothing else of the protocol is needed)."""

    def __init__(self, data, split: RowSplit):
        self.data, self.split = data, split
        self.theta, self.m, self.d, self.chunk_rows = data.theta, data.m, data.d, data.chunk_rows
        # names the rows a chunk shows here, for caches keyed by chunk (rffor.solvers.feature_cache); the data's own
        # tag first when its chunk ids are not the store's (row pieces)
        base = getattr(data, "cache_tag", "all")
        side = f"split{split.modulus}-{'held' if split.held_out else 'kept'}"
        self.cache_tag = side if base == "all" else f"{base}/{side}"

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        X, Y = self.data.chunk(i)
        keep = self.split.mask(row_start(self.data, i), X.shape[0])
        return X[keep], Y[keep]

    def iter_chunks(self, chunk_ids: Sequence[int] | None = None, **kw):
        for i, X, Y in self.data.iter_chunks(chunk_ids, **kw):
            keep = self.split.mask(row_start(self.data, i), X.shape[0])
            yield i, X[keep], Y[keep]


#: most rows of a piece :meth:`RowPieces.spread` makes: a partition's rows come in pieces small enough for the
#: threads of a worker to share them (``partitions_per="worker"``), as large as a block of features
#: (:mod:`rffor.solvers.sums` computes φ_X 4096 rows at a time)
PIECE_ROWS = 4096


class RowPieces:
    """Row ranges ("pieces") of chunks of a chunked dataset, as a chunked dataset whose chunks are the pieces.

    Piece j is rows ``start … stop − 1`` of chunk ``chunk`` of ``data`` (row j of :attr:`pieces`). Everything a task
    does with a chunk id works with a piece id: ``chunk(j)`` reads the piece's chunk and returns the piece's rows,
    ``row_start(j)`` is the global index of its first row (so a :class:`RowSplit` holds out the same rows as on the
    whole chunks), and :attr:`cache_tag` names the layout of the pieces for caches keyed by chunk id.

    Parameters
    ----------
    data : chunked dataset
    pieces : array-like of int, shape (k, 3)
        ``(chunk, start, stop)`` of every piece: non-empty, within their chunk, in increasing global row order
        (pieces never overlap).
    groups : list of list of int, optional
        The pieces of each partition, for ``n_partitions`` partitions (what :meth:`partition` returns for that P;
        other P: :func:`partition_chunks` of the pieces).
    n_partitions : int, optional
        The P of ``groups`` (default ``len(groups)``).

    Notes
    -----
    A task reads the chunk of every piece it processes: :meth:`iter_chunks` reads a chunk once for consecutive
    pieces of it; a chunk whose pieces go to several partitions is read once by each.
    """

    def __init__(self, data, pieces, groups: Sequence[Sequence[int]] | None = None, n_partitions: int | None = None):
        pieces = np.asarray(pieces, dtype=np.int64).reshape(-1, 3)
        if pieces.shape[0] == 0:
            raise ValueError("pieces is empty")
        chunk, start, stop = pieces.T
        sizes = np.array([chunk_rows(data, int(i)) for i in chunk])
        if np.any(chunk < 0) or np.any(chunk >= data.n_chunks) or np.any(start < 0) or np.any(stop > sizes):
            raise ValueError("every piece must be (chunk, start, stop) with rows inside one chunk of the data")
        if np.any(stop <= start):
            raise ValueError("every piece must hold at least one row (start < stop)")
        first = np.array([row_start(data, int(i)) for i in chunk]) + start
        if np.any(first[1:] < (first + stop - start)[:-1]):
            raise ValueError("pieces must be in increasing row order and must not overlap")
        self.data = data
        self.pieces = pieces
        self._first = first
        self.groups = None if groups is None else [[int(j) for j in g] for g in groups]
        if self.groups is not None and sorted(j for g in self.groups for j in g) != list(range(len(pieces))):
            raise ValueError("groups must hold every piece id exactly once")
        self.n_partitions = None if groups is None else int(n_partitions or len(self.groups))
        self.n = int(np.sum(stop - start))
        self.d, self.m = int(data.d), int(data.m)
        self.theta = np.asarray(data.theta, dtype=np.float64)
        self.chunk_rows = int(np.max(stop - start))
        self.n_chunks = int(len(pieces))
        self.workers_can_read = bool(data.workers_can_read)
        digest = hashlib.sha1(pieces.tobytes()).hexdigest()[:12]
        base = getattr(data, "cache_tag", "all")
        self.cache_tag = f"pieces-{digest}" if base == "all" else f"{base}/pieces-{digest}"

    @classmethod
    def spread(cls, data, chunk_ids: Sequence[int], n_partitions: int, piece_rows: int = PIECE_ROWS) -> RowPieces:
        """The rows of some chunks shared by P partitions: partition k gets rows ``⌊kR/P⌋ … ⌊(k+1)R/P⌋ − 1`` of
        the R rows of those chunks (in chunk order), cut at chunk boundaries and into pieces of at most
        ``piece_rows`` rows of about equal size.

        Parameters
        ----------
        data : chunked dataset
        chunk_ids : sequence of int
            The chunks (e.g. :func:`spread_chunks`: a sample spread over the data).
        n_partitions : int
            P (``min(P, R)`` partitions get rows).
        piece_rows : int
            Most rows of a piece.

        Returns
        -------
        RowPieces
            With ``groups``: the pieces of each partition. A function of the chunks, P and ``piece_rows`` only.
        """
        ids = sorted({int(i) for i in chunk_ids})
        if not ids:
            raise ValueError("chunk_ids is empty")
        P = check_int(n_partitions, "n_partitions", 1)
        piece_rows = check_int(piece_rows, "piece_rows", 1)
        rows = np.array([chunk_rows(data, i) for i in ids], dtype=np.int64)
        offsets = np.concatenate([[0], np.cumsum(rows)])
        R = int(offsets[-1])
        P_asked, P = P, min(P, R)
        bounds = (np.arange(P + 1, dtype=np.int64) * R) // P
        pieces: list[tuple[int, int, int]] = []
        groups: list[list[int]] = []
        for k in range(P):
            lo, hi = int(bounds[k]), int(bounds[k + 1])
            group = []
            first = int(np.searchsorted(offsets, lo, side="right")) - 1
            last = int(np.searchsorted(offsets, hi, side="left"))
            for c in range(first, last):  # the chunks this partition's row range meets
                a = max(lo, int(offsets[c])) - int(offsets[c])
                b = min(hi, int(offsets[c + 1])) - int(offsets[c])
                if b <= a:
                    continue
                n_cuts = -(-(b - a) // piece_rows)  # pieces of about equal size, at most piece_rows rows
                cuts = a + ((b - a) * np.arange(n_cuts + 1)) // n_cuts
                for s, e in zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True):
                    group.append(len(pieces))
                    pieces.append((ids[c], s, e))
            groups.append(group)
        return cls(data, pieces, groups, n_partitions=P_asked)

    def row_start(self, j: int) -> int:
        """Global index (in ``data``) of piece j's first row."""
        return int(self._first[int(j)])

    def rows_of(self, j: int) -> int:
        """Rows of piece j."""
        _, a, b = self.pieces[int(j)]
        return int(b - a)

    def chunk(self, j: int) -> tuple[np.ndarray, np.ndarray]:
        """``(X_j, Y_j)``: the rows of piece j (its chunk read, then sliced)."""
        if not 0 <= int(j) < self.n_chunks:
            raise IndexError(f"piece id {j} out of range for {self.n_chunks} pieces")
        c, a, b = (int(v) for v in self.pieces[int(j)])
        X, Y = self.data.chunk(c)
        return X[a:b], Y[a:b]

    def iter_chunks(self, chunk_ids: Sequence[int] | None = None, **kw):
        """Yield ``(j, X_j, Y_j)`` for the given piece ids in order (default all), reading each chunk once for a run
        of consecutive pieces of it (through ``data.iter_chunks``, which may read ahead)."""
        ids = range(self.n_chunks) if chunk_ids is None else [int(j) for j in chunk_ids]
        runs: list[tuple[int, list[int]]] = []
        for j in ids:
            if not 0 <= j < self.n_chunks:
                raise IndexError(f"piece id {j} out of range for {self.n_chunks} pieces")
            c = int(self.pieces[j, 0])
            if runs and runs[-1][0] == c:
                runs[-1][1].append(j)
            else:
                runs.append((c, [j]))
        chunks = self.data.iter_chunks([c for c, _ in runs], **kw)
        for (_, run), (_, X, Y) in zip(runs, chunks, strict=True):
            for j in run:
                _, a, b = (int(v) for v in self.pieces[j])
                yield j, X[a:b], Y[a:b]

    def partition(self, n_partitions: int) -> list[list[int]]:
        """The groups of :meth:`spread` for the P they were made for; :func:`partition_chunks` of the pieces
        otherwise."""
        if self.groups is not None and int(n_partitions) == self.n_partitions:
            return [list(g) for g in self.groups if g]
        return partition_chunks(self.n_chunks, n_partitions)

    def subset(self, chunk_ids: Sequence[int]) -> ChunkSubset:
        """The given pieces (copies of their rows) under their ids, with their row starts and cache tag."""
        return ChunkSubset(self, chunk_ids)

    def __repr__(self) -> str:
        return f"RowPieces({self.n_chunks} pieces of {len(set(self.pieces[:, 0].tolist()))} chunks, n={self.n})"


class ExpandedTargets:
    """Scalar targets seen as curves on a grid: ``Y[r, j] = y_r − b_j`` (the quantile path, MATH.md §6: a scalar
    target is a constant curve over the levels θ_j, minus the intercept curve b of the model).

    A chunked dataset over ``base`` (whose outputs have one column): the same rows, chunks and partitions, with
    ``m = len(theta)`` columns computed chunk by chunk (never stored). ``base`` is kept, so that the doubly
    stochastic steps, which draw their own levels, read the scalar targets themselves
    (:func:`rffor.solvers.dsgd.partition_steps`).

    Parameters
    ----------
    base : chunked dataset
        Scalar targets: ``m == 1``.
    theta : ndarray of shape (m,)
        The grid (quantile levels).
    offset : ndarray of shape (m,)
        b on the grid.
    """

    def __init__(self, base, theta, offset):
        if base.m != 1:
            raise ValueError(f"expanded targets need scalar targets (m = 1), the data has m = {base.m}")
        self.base = base
        self.theta = np.asarray(theta, dtype=np.float64)
        self.offset = np.asarray(offset, dtype=np.float64)
        if self.offset.shape != self.theta.shape:
            raise ValueError(f"offset must have the shape of theta {self.theta.shape}, got {self.offset.shape}")
        self.n, self.d, self.m = base.n, base.d, int(self.theta.shape[0])
        self.chunk_rows, self.n_chunks = base.chunk_rows, base.n_chunks
        self.workers_can_read = base.workers_can_read
        self.cache_tag = getattr(base, "cache_tag", "all")

    def _expand(self, Y: np.ndarray) -> np.ndarray:
        Y = np.asarray(Y)
        dtype = Y.dtype if np.issubdtype(Y.dtype, np.floating) else np.float64
        return np.asarray(Y[:, :1], dtype=dtype) - self.offset.astype(dtype)[None, :]

    def chunk(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        X, Y = self.base.chunk(i)
        return X, self._expand(Y)

    def iter_chunks(self, chunk_ids: Sequence[int] | None = None, **kw):
        for i, X, Y in self.base.iter_chunks(chunk_ids, **kw):
            yield i, X, self._expand(Y)

    def partition(self, n_partitions: int) -> list[list[int]]:
        return self.base.partition(n_partitions)

    def subset(self, chunk_ids: Sequence[int]) -> ExpandedTargets:
        return ExpandedTargets(self.base.subset(chunk_ids), self.theta, self.offset)

    def __repr__(self) -> str:
        return f"ExpandedTargets({self.base!r}, m={self.m})"


def as_data(data, theta=None, chunk_rows: int | None = None):
    """A chunked dataset from one (returned as it is) or from a tuple ``(X, Y)`` / ``(X, Y, theta)`` (validated).

    Raises
    ------
    TypeError
        ``data`` is neither a tuple nor an object with the attributes of the protocol (:data:`PROTOCOL`).
    """
    if isinstance(data, tuple):
        if len(data) == 2:
            X, Y = data
        elif len(data) == 3:
            X, Y, theta = data
        else:
            raise ValueError("data must be a chunked dataset or a tuple (X, Y[, theta])")
        X = check_X(X)
        Y = check_Y(Y, n_samples=X.shape[0])
        return ArrayData(X, Y, check_theta(theta, Y.shape[1]), chunk_rows=chunk_rows)
    missing = [a for a in PROTOCOL if not hasattr(data, a)]
    if not getattr(data, "workers_can_read", True) and not hasattr(data, "subset"):
        missing.append("subset")
    if missing:
        raise TypeError(
            f"data must be a chunked dataset (rffor.data.Dataset, rffor.chunked.ArrayData, or an object with "
            f"{', '.join(PROTOCOL)}) or a tuple (X, Y[, theta]); {type(data).__name__} has no {missing}"
        )
    return data
