"""Reductions of the executor tests and their pieces, importable on worker processes (tests/ is on their path).

A leaf turns its partition's rows into a partial whose merge depends on the order: a TSQR factor ``[R | Z]`` of
random cosine features of the inputs next to the outputs (merged by :func:`rffor._linalg.merge_triangular`), or the
float64 sums of their products (merged by ``+``).
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np

from rffor._linalg import append_rows, merge_triangular
from rffor.executor import chunkwise


def features(X: np.ndarray, Y: np.ndarray, W: np.ndarray) -> np.ndarray:
    """``[cos(X W[:-1] + W[-1]) | Y]``, shape (rows, D + m)."""
    return np.hstack([np.cos(X @ W[:-1] + W[-1]), np.nan_to_num(Y)])


def make_frequencies(d: int, D: int, seed: int = 0, ballast: int = 0) -> np.ndarray:
    """Frequencies (d rows) and phases (last row) of D cosine features; ``ballast`` extra zero columns make the
    shared object larger (the leaves ignore them)."""
    rng = np.random.default_rng(seed)
    W = np.vstack([rng.standard_normal((d, D)), rng.uniform(0, 2 * np.pi, (1, D))])
    return np.hstack([W, np.zeros((d + 1, ballast))]) if ballast else W


def tsqr_leaf(part, p, chunk_ids, W, D):
    """The TSQR factor of the partition's rows, shape (D, D + m)."""
    r = None
    for _, X, Y in part.iter_chunks([int(i) for i in chunk_ids]):
        A = features(X, Y, W[:, :D])
        r = append_rows(np.zeros((D, A.shape[1])) if r is None else r, A)
    return r


def gram_leaf(part, p, chunk_ids, W, D):
    """``AᵀA`` of the partition's rows (float64 sums: their sum depends on the order of its terms)."""
    g = None
    for _, X, Y in part.iter_chunks([int(i) for i in chunk_ids]):
        A = features(X, Y, W[:, :D])
        g = A.T @ A if g is None else g + A.T @ A
    return g


def slow_merge(a, b):
    """:func:`merge_triangular` after 0.3 s (time to kill the worker doing it)."""
    time.sleep(0.3)
    return merge_triangular(a, b)


def slow_tsqr_leaf(part, p, chunk_ids, W, D):
    """:func:`tsqr_leaf` after 0.2 s."""
    time.sleep(0.2)
    return tsqr_leaf(part, p, chunk_ids, W, D)


def label_leaf(part, p, chunk_ids, W, D):
    """The partition's index as a string (to see the shape of the merge tree)."""
    return str(p)


def bracket(a, b):
    """``"(a+b)"``: a merge that spells out the tree it was folded by."""
    return f"({a}+{b})"


@chunkwise
def tsqr_chunks(part, p, chunk_ids, W, D):
    """:func:`tsqr_leaf`, declared chunkwise (``partitions_per="worker"`` folds it chunk by chunk)."""
    return tsqr_leaf(part, p, chunk_ids, W, D)


@chunkwise
def gram_chunks(part, p, chunk_ids, W, D):
    """:func:`gram_leaf`, declared chunkwise."""
    return gram_leaf(part, p, chunk_ids, W, D)


@chunkwise
def thread_names(part, p, chunk_ids, W, D):
    """The (process, thread name) pairs that computed the partition's chunks (merge: set union), 50 ms per chunk."""
    time.sleep(0.05)
    return frozenset([(os.getpid(), threading.current_thread().name)])


def chunk_label(part, p, chunk_ids, *args):
    """The chunk's id as a string (one chunk per call: to see the shape of a partition's tree of chunks)."""
    (i,) = chunk_ids
    return str(i)
