"""Tests of the chunked-data protocol (rffor.chunked): partitions, the in-memory backends, the row split, expanded
scalar targets and :func:`as_data`.

What the fits do with chunked data (sums, DSGD rounds, MM passes, executors) is tested with them; the Zarr backend
(:class:`rffor.data.Dataset`) in tests/test_data.py.
"""

from __future__ import annotations

import itertools
import pickle

import numpy as np
import pytest

import rffor.data
from rffor.chunked import (
    PROTOCOL,
    ArrayData,
    ChunkSubset,
    ExpandedTargets,
    RowPieces,
    RowSplit,
    as_data,
    chunk_rows,
    partition_chunks,
    row_start,
    splitmix64,
    spread_chunks,
)


def _data(n=53, d=3, m=4, c=10, seed=0) -> ArrayData:
    """Rows whose first input is their global index (to see which rows a view shows)."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.arange(n, dtype=float), rng.standard_normal((n, d - 1))])
    return ArrayData(X, rng.standard_normal((n, m)), chunk_rows=c)


def _rows(chunks) -> np.ndarray:
    """The global indices of the rows of ``(i, X_i, Y_i)`` triples (first input column, see :func:`_data`)."""
    return np.concatenate([X[:, 0] for _, X, _ in chunks]).astype(int)


# ---------------------------------------------------------------------------------------------------------------
# partitions
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("n, c", [(100, 10), (103, 10), (7, 1), (5, 5), (95, 20)])
@pytest.mark.parametrize("P", [1, 2, 3, 4, 7, 50])
def test_partition_covers_every_chunk_once_with_balanced_rows(n, c, P):
    data = ArrayData(np.zeros((n, 1)), np.ones((n, 2)), chunk_rows=c)
    parts = data.partition(P)
    assert parts == partition_chunks(data.n_chunks, P)
    assert len(parts) == min(P, data.n_chunks)
    assert all(parts)  # no empty group
    assert [i for part in parts for i in part] == list(range(data.n_chunks))  # every chunk once, contiguous, in order
    rows = [sum(chunk_rows(data, i) for i in part) for part in parts]
    assert sum(rows) == n
    assert max(rows) - min(rows) <= c  # as even as whole chunks allow


def test_partition_minimises_the_largest_group():
    """The largest group's rows are the least over every split of the chunks into min(P, n_chunks) contiguous
    non-empty groups (brute force over all of them, with a short last chunk)."""
    for n_chunks, c, P in itertools.product(range(1, 10), (1, 3, 5), range(1, 7)):
        for last in range(1, c + 1):
            rows = [c] * (n_chunks - 1) + [last]
            p = min(P, n_chunks)
            got = max(sum(rows[i] for i in part) for part in partition_chunks(n_chunks, P))
            best = min(
                max(sum(rows[a:b]) for a, b in zip((0, *cut), (*cut, n_chunks), strict=True))
                for cut in itertools.combinations(range(1, n_chunks), p - 1)
            )
            assert got == best, (n_chunks, c, last, P)


@pytest.mark.parametrize(
    "P, error", [(0, ValueError), (-2, ValueError), (2.0, TypeError), (True, TypeError), ("2", TypeError)]
)
def test_partition_rejects_a_bad_count(P, error):
    with pytest.raises(error, match="n_partitions"):
        partition_chunks(5, P)


def test_chunk_rows_are_the_rows_of_each_chunk_without_reading_it():
    data = _data(n=53, c=10)
    sizes = [chunk_rows(data, i) for i in range(data.n_chunks)]
    assert sizes == [len(data.chunk(i)[0]) for i in range(data.n_chunks)] == [10, 10, 10, 10, 10, 3]
    assert chunk_rows(data, data.n_chunks) == 0


# ---------------------------------------------------------------------------------------------------------------
# in-memory data and its subsets
# ---------------------------------------------------------------------------------------------------------------


def test_array_data_interface():
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((600, 20)), rng.standard_normal((600, 30))
    theta = np.sort(rng.uniform(size=30))
    a = ArrayData(X, Y, theta, chunk_rows=160)
    assert (a.n, a.d, a.m, a.n_chunks, a.chunk_rows) == (600, 20, 30, 4, 160)
    X3, Y3 = a.chunk(3)
    assert X3.shape == (120, 20) and Y3.shape == (120, 30)
    assert np.shares_memory(X3, X) and np.shares_memory(Y3, Y)  # chunks are views, nothing copied
    np.testing.assert_array_equal(X3, X[480:])
    assert [i for i, _, _ in a.iter_chunks([2, 0])] == [2, 0]
    assert [i for i, _, _ in a.iter_chunks()] == [0, 1, 2, 3]
    np.testing.assert_array_equal(a.theta, theta)
    a.theta[0] = 99.0  # a copy: the data's grid does not change
    np.testing.assert_array_equal(a.theta, theta)
    np.testing.assert_array_equal(ArrayData(X, Y).theta, np.linspace(0, 1, 30))
    assert ArrayData(X, Y).chunk_rows == 600  # the default 16384 capped at n
    assert not a.workers_can_read
    assert repr(a) == "ArrayData(n=600, d=20, m=30, chunk_rows=160)"
    with pytest.raises(ValueError, match="chunk_rows"):
        ArrayData(X, Y, chunk_rows=0)
    with pytest.raises(ValueError, match="same number of rows"):
        ArrayData(X, Y[:5])
    with pytest.raises(ValueError, match="2-D"):
        ArrayData(X[:, 0], Y)
    with pytest.raises(ValueError, match="no rows"):
        ArrayData(X[:0], Y[:0])
    with pytest.raises(IndexError, match="out of range"):
        a.chunk(4)


def test_chunk_subset_holds_its_chunks_under_their_global_ids():
    a = _data(n=53, c=10)
    sub = a.subset([1, 3])
    assert isinstance(sub, ChunkSubset)
    assert (sub.n, sub.d, sub.m, sub.chunk_rows, sub.n_chunks) == (a.n, a.d, a.m, a.chunk_rows, a.n_chunks)
    assert sub.partition(3) == a.partition(3)  # the whole's partitions: a worker knows which chunks are its own
    np.testing.assert_array_equal(sub.theta, a.theta)
    for i in (1, 3):
        for mine, whole in zip(sub.chunk(i), a.chunk(i), strict=True):
            np.testing.assert_array_equal(mine, whole)  # (views of contiguous rows; pickled, just those rows)
    np.testing.assert_array_equal(_rows(sub.iter_chunks([3, 1])), np.r_[30:40, 10:20])
    with pytest.raises(IndexError, match=r"chunk 0 is not part of this subset \(\[1, 3\]\)"):
        sub.chunk(0)
    again = sub.subset([3])
    np.testing.assert_array_equal(again.chunk(3)[1], a.chunk(3)[1])
    with pytest.raises(IndexError):
        again.chunk(1)
    assert "chunks=[1, 3]" in repr(sub)


def test_chunk_subset_pickles_to_the_size_of_its_rows():
    rng = np.random.default_rng(1)
    a = ArrayData(rng.standard_normal((4000, 8)), rng.standard_normal((4000, 16)), chunk_rows=500)
    row_bytes = (8 + 16) * 8
    sub = a.subset([2])
    assert 500 * row_bytes < len(pickle.dumps(sub)) < 500 * row_bytes + 4000
    back = pickle.loads(pickle.dumps(sub))
    np.testing.assert_array_equal(back.chunk(2)[0], a.chunk(2)[0])


# ---------------------------------------------------------------------------------------------------------------
# the protocol and as_data
# ---------------------------------------------------------------------------------------------------------------


def test_every_backend_has_the_protocol(tmp_path):
    a = _data()
    store = rffor.data.write(tmp_path / "d.zarr", a.X, a.Y, chunks=10)
    backends = [a, a.subset([0, 2]), ExpandedTargets(ArrayData(a.X, a.Y[:, :1]), [0.2, 0.8], [0.0, 1.0]), store]
    for data in backends:
        assert all(hasattr(data, name) for name in PROTOCOL), type(data)
        assert data.workers_can_read or hasattr(data, "subset")
        assert as_data(data) is data
        assert data.partition(2) == partition_chunks(data.n_chunks, 2)
        assert [i for i, _, _ in data.iter_chunks([0])] == [0]


def test_as_data_validates_and_wraps_tuples():
    rng = np.random.default_rng(2)
    X, Y = rng.standard_normal((20, 3)), rng.standard_normal((20, 5))
    a = as_data((X, Y))
    assert isinstance(a, ArrayData) and (a.n, a.d, a.m) == (20, 3, 5)
    np.testing.assert_array_equal(a.theta, np.linspace(0, 1, 5))
    theta = np.array([0.0, 0.1, 0.5, 0.6, 2.0])
    np.testing.assert_array_equal(as_data((X, Y, theta)).theta, theta)
    np.testing.assert_array_equal(as_data((X, Y), theta=theta).theta, theta)
    assert as_data((X, Y), chunk_rows=6).n_chunks == 4
    assert as_data((X.tolist(), Y.tolist())).X.dtype == np.float64
    with pytest.raises(ValueError, match="tuple"):
        as_data((X, Y, theta, None))
    with pytest.raises(ValueError):
        as_data((X, Y[:7]))  # the rows of X and Y differ
    with pytest.raises(ValueError):
        as_data((X, Y, theta[:3]))  # theta does not match the columns of Y
    with pytest.raises(ValueError):
        as_data((X, Y, theta[::-1]))  # theta must increase


class _Backend:
    """A storage backend written outside rffor: the attributes of the protocol, readable by workers."""

    workers_can_read = True

    def __init__(self, data):
        self._data = data
        for name in ("n", "d", "m", "theta", "chunk_rows", "n_chunks", "chunk", "iter_chunks", "partition"):
            setattr(self, name, getattr(data, name))


def test_as_data_accepts_any_object_with_the_protocol_and_names_what_is_missing():
    a = _data()
    backend = _Backend(a)
    assert as_data(backend) is backend
    with pytest.raises(TypeError, match=r"ndarray has no \['n', 'd', 'm', 'theta'"):
        as_data(a.X)
    del backend.partition
    with pytest.raises(TypeError, match=r"_Backend has no \['partition'\]"):
        as_data(backend)
    backend.partition = a.partition
    backend.workers_can_read = False  # rows shipped from this process: a subset is needed
    with pytest.raises(TypeError, match=r"has no \['subset'\]"):
        as_data(backend)


# ---------------------------------------------------------------------------------------------------------------
# the row split
# ---------------------------------------------------------------------------------------------------------------


def test_row_split_is_global_and_about_one_in_modulus():
    split = RowSplit(10, True)
    n = 20_000
    held = split.mask(0, n)
    assert abs(held.mean() - 0.1) < 0.01
    # the same rows whatever the chunking: masks of chunks concatenate to the mask of the whole
    X, Y = np.arange(n, dtype=float)[:, None], np.zeros((n, 2))
    for c in (7, 1000):
        data = ArrayData(X, Y, chunk_rows=c)
        rows = np.concatenate([Xi[:, 0] for _, Xi, _ in split.view(data).iter_chunks(range(data.n_chunks))])
        np.testing.assert_array_equal(rows, np.flatnonzero(held))
    other = np.concatenate([Xi[:, 0] for _, Xi, _ in split.side(False).view(data).iter_chunks(range(data.n_chunks))])
    np.testing.assert_array_equal(other, np.flatnonzero(~held))


@pytest.mark.parametrize("modulus", [2, 3, 7, 10, 50])
def test_row_split_holds_out_a_fraction_one_over_modulus_of_every_chunk(modulus):
    """About n/modulus rows (within 4 binomial standard deviations), in every chunk of 2,000 rows."""
    n, c = 40_000, 2_000
    held = RowSplit(modulus, True).mask(0, n)
    p = 1 / modulus
    assert abs(held.sum() - n * p) <= 4 * np.sqrt(n * p * (1 - p))
    per_chunk = held.reshape(-1, c).sum(axis=1)
    assert np.all(np.abs(per_chunk - c * p) <= 4 * np.sqrt(c * p * (1 - p))), per_chunk
    np.testing.assert_array_equal(RowSplit(modulus, False).mask(0, n), ~held)  # the two sides


def test_row_split_is_the_same_through_chunk_subsets_and_partitions():
    """A worker's subset of the chunks shows the rows the whole shows on those chunks (ids are global)."""
    a = _data(n=503, c=20)
    split = RowSplit(7, True)
    whole = _rows(split.view(a).iter_chunks())
    from_parts = np.concatenate([_rows(split.view(a.subset(part)).iter_chunks(part)) for part in a.partition(4)])
    np.testing.assert_array_equal(from_parts, whole)
    np.testing.assert_array_equal(whole, np.flatnonzero(split.mask(0, a.n)))
    view = split.view(a)
    for i in (0, 5, a.n_chunks - 1):
        X_i, Y_i = view.chunk(i)
        np.testing.assert_array_equal(X_i[:, 0].astype(int), _rows([(i, *view.chunk(i))]))
        np.testing.assert_array_equal(Y_i, a.Y[X_i[:, 0].astype(int)])
    assert view.cache_tag != split.side(False).view(a).cache_tag  # caches keyed by chunk tell the sides apart


@pytest.mark.parametrize(
    "modulus, period",
    [
        *[(m, p) for m in (2, 3, 7, 10, 16) for p in (2, 3, 4)],
    ],
)
def test_row_split_is_unrelated_to_a_periodic_order_of_the_rows(modulus, period):
    """Rows in a periodic order (e.g. two interleaved sources): every residue class of the row index modulo a small
    period holds out about one row in ``modulus`` (RowSplit's docstring: hashing, not ``g mod modulus``)."""
    n = 60_000
    held = RowSplit(modulus, True).mask(0, n)
    p = 1 / modulus
    per_class = held.reshape(-1, period).sum(axis=0)  # held-out rows among g ≡ r (mod period), r = 0 … period − 1
    k = n // period
    assert np.all(np.abs(per_class - k * p) <= 4 * np.sqrt(k * p * (1 - p))), per_class


def test_splitmix64_is_the_reference_generator():
    """splitmix64(k·0x9E3779B97F4A7C15) is output k + 1 of the SplitMix64 generator seeded with 0 (the reference
    values of Vigna's splitmix64.c), and the bits of the hash of consecutive integers are balanced."""
    golden = np.uint64(0x9E3779B97F4A7C15)
    g = np.arange(3, dtype=np.uint64) * golden
    assert [int(v) for v in splitmix64(g)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]
    h = splitmix64(np.arange(100_000, dtype=np.uint64))
    bits = (h[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    assert np.all(np.abs(bits.mean(axis=0) - 0.5) < 4 * 0.5 / np.sqrt(len(h)))


@pytest.mark.parametrize("modulus", [2, 4, 10, 20])
def test_row_split_holds_out_even_and_odd_rows_alike(modulus):
    """The held-out fraction among even rows equals that among odd rows (within 4 binomial standard deviations),
    for even moduli too: the multiplicative hash used before held out only even rows when the modulus was even."""
    n = 100_000
    held = RowSplit(modulus, True).mask(0, n)
    p, k = 1 / modulus, n // 2
    for parity in (0, 1):
        assert abs(held[parity::2].sum() - k * p) <= 4 * np.sqrt(k * p * (1 - p)), (parity, held[parity::2].sum())


@pytest.mark.parametrize("modulus, error", [(1, ValueError), (0, ValueError), (2.5, ValueError), (True, ValueError)])
def test_row_split_rejects_a_bad_modulus(modulus, error):
    with pytest.raises(error, match="modulus"):
        RowSplit(modulus, True)


# ---------------------------------------------------------------------------------------------------------------
# scalar targets as curves
# ---------------------------------------------------------------------------------------------------------------


def test_expanded_targets_are_constant_curves_minus_the_offset():
    rng = np.random.default_rng(3)
    X, y = rng.uniform(0, 1.5, (50, 1)), rng.standard_normal(50)
    base = ArrayData(X, y[:, None], chunk_rows=16)
    levels = np.array([0.1, 0.5, 0.9])
    view = ExpandedTargets(base, levels, np.array([-1.0, 0.0, 2.0]))
    assert (view.n, view.d, view.m, view.n_chunks, view.chunk_rows) == (50, 1, 3, 4, 16)
    np.testing.assert_array_equal(view.theta, levels)
    _, Y = view.chunk(1)
    np.testing.assert_array_equal(Y, y[16:32, None] - [-1.0, 0.0, 2.0])
    np.testing.assert_array_equal(
        np.concatenate([Y_i for _, _, Y_i in view.iter_chunks()]), y[:, None] - [-1.0, 0.0, 2.0]
    )
    assert view.partition(3) == base.partition(3) and view.workers_can_read == base.workers_can_read
    sub = view.subset([2])
    np.testing.assert_array_equal(sub.chunk(2)[1], view.chunk(2)[1])
    assert sub.base.chunk(2)[1].shape == (16, 1)
    with pytest.raises(ValueError, match="m = 1"):
        ExpandedTargets(view, levels, np.zeros(3))
    with pytest.raises(ValueError, match="offset must have the shape of theta"):
        ExpandedTargets(base, levels, np.zeros(2))


def test_expanded_targets_keep_a_floating_dtype_and_a_row_split_of_them_holds_out_the_same_rows():
    y = np.arange(12.0)
    levels, offset = np.array([0.25, 0.75]), np.array([0.5, -0.5])
    f32 = ExpandedTargets(ArrayData(np.zeros((12, 1)), y[:, None].astype(np.float32), chunk_rows=5), levels, offset)
    assert f32.chunk(0)[1].dtype == np.float32
    ints = ExpandedTargets(ArrayData(np.zeros((12, 1)), np.arange(12)[:, None], chunk_rows=5), levels, offset)
    assert ints.chunk(0)[1].dtype == np.float64
    np.testing.assert_array_equal(ints.chunk(2)[1], y[10:, None] - offset)
    split = RowSplit(3, True)
    held = split.view(ExpandedTargets(ArrayData(y[:, None], y[:, None], chunk_rows=5), levels, offset))
    np.testing.assert_array_equal(
        np.concatenate([Y_i for _, _, Y_i in held.iter_chunks(range(3))]), y[split.mask(0, 12), None] - offset
    )


# ---------------------------------------------------------------------------------------------------------------
# row pieces: a sample of chunks shared by every partition
# ---------------------------------------------------------------------------------------------------------------


class _CountingReads(ArrayData):
    """ArrayData that counts its chunk reads (what a Zarr store would read and decompress)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.reads = 0

    def chunk(self, i):
        self.reads += 1
        return super().chunk(i)


@pytest.mark.parametrize(("P", "piece_rows"), [(1, 4096), (3, 7), (4, 10), (7, 3), (40, 5), (500, 4)])
def test_row_pieces_share_a_sample_of_chunks_among_every_partition(P, piece_rows):
    """The rows of the sampled chunks, in order, each once; every partition gets ⌊R/P⌋ or ⌈R/P⌉ of the R rows (not
    whole chunks: 4 chunks feed 40 partitions); pieces are non-empty, within one chunk and at most piece_rows."""
    data = _data(n=103, c=10)
    chunks = spread_chunks(data, 40)  # 4 of the 11 chunks
    assert chunks == [0, 3, 7, 10]
    pieces = RowPieces.spread(data, chunks, P, piece_rows=piece_rows)
    R = sum(chunk_rows(data, i) for i in chunks)  # the last chunk has 3 rows
    assert R == 33 and pieces.n == R
    np.testing.assert_array_equal(_rows(pieces.iter_chunks()), _rows(data.iter_chunks(chunks)))
    groups = pieces.partition(P)
    assert len(groups) == min(P, R) and [j for g in groups for j in g] == list(range(pieces.n_chunks))
    sizes = [sum(pieces.rows_of(j) for j in g) for g in groups]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == R
    lengths = pieces.pieces[:, 2] - pieces.pieces[:, 1]
    assert lengths.min() >= 1 and lengths.max() <= piece_rows and pieces.chunk_rows == lengths.max()
    for j in range(pieces.n_chunks):  # the global index of every piece's first row, and its rows
        X, _ = pieces.chunk(j)
        assert row_start(pieces, j) == X[0, 0] and chunk_rows(pieces, j) == len(X)
    # a piece's rows come from one read of its chunk; consecutive pieces of a chunk share that read
    counting = _CountingReads(data.X, data.Y, chunk_rows=10)
    spread = RowPieces.spread(counting, chunks, P, piece_rows=piece_rows)
    for g in spread.partition(P):
        list(spread.iter_chunks(g))
    assert counting.reads == sum(len({int(spread.pieces[j, 0]) for j in g}) for g in spread.partition(P))
    assert counting.reads <= len(chunks) + len(groups) - 1


def test_row_pieces_keep_the_row_split_and_name_their_rows_in_caches():
    """A row split holds out the same rows of the pieces as of the whole chunks (through a subset shipped to a
    worker too), and the pieces' cache tag differs from the chunks' and from other pieces' (same ids, other rows)."""
    data = _data(n=103, c=10)
    chunks = [1, 4, 5, 9]
    pieces = RowPieces.spread(data, chunks, 3, piece_rows=4)
    for held in (True, False):
        split = RowSplit(3, held)
        whole = _rows(split.view(data).iter_chunks(chunks))
        np.testing.assert_array_equal(_rows(split.view(pieces).iter_chunks()), whole)
        shipped = [_rows(split.view(pieces.subset(g)).iter_chunks(g)) for g in pieces.partition(3)]
        np.testing.assert_array_equal(np.concatenate(shipped), whole)
        assert split.view(pieces).cache_tag.startswith(pieces.cache_tag + "/")
        assert split.view(pieces.subset([0])).cache_tag == split.view(pieces).cache_tag
        assert split.view(data).cache_tag == f"split3-{'held' if held else 'kept'}"  # the store's chunks: as before
    other = RowPieces.spread(data, chunks, 4, piece_rows=3)
    assert not np.array_equal(other.pieces, pieces.pieces) and len({pieces.cache_tag, other.cache_tag, "all"}) == 3
    assert RowPieces.spread(data, chunks, 3, piece_rows=4).cache_tag == pieces.cache_tag  # a function of the layout
    back = pickle.loads(pickle.dumps(pieces.subset([2, 3])))
    assert back.row_start(3) == pieces.row_start(3) and back.cache_tag == pieces.cache_tag
    assert as_data(pieces) is pieces and pieces.partition(2) == partition_chunks(pieces.n_chunks, 2)


@pytest.mark.parametrize(
    ("pieces", "error"),
    [
        ([], "empty"),
        ([(0, 0, 11)], "inside one chunk"),
        ([(11, 0, 1)], "inside one chunk"),
        ([(0, 3, 3)], "at least one row"),
        ([(2, 0, 5), (1, 0, 5)], "increasing row order"),
        ([(1, 0, 5), (1, 4, 6)], "increasing row order"),
    ],
)
def test_row_pieces_reject_bad_pieces(pieces, error):
    with pytest.raises(ValueError, match=error):
        RowPieces(_data(n=103, c=10), pieces)
    with pytest.raises(ValueError, match="every piece id"):
        RowPieces(_data(n=103, c=10), [(0, 0, 5), (0, 5, 10)], groups=[[0], [0]])
