"""Input features kept, between the passes of a fit, in the memory of the process that computed them.

A random-feature fit passes over the same rows many times with the same feature map (closed-form sums, MM gradient
passes, λ-path passes, held-out errors), and computing φ_X often costs more than the rest of a pass (Nyström: an
(rows × M) kernel block, one GEMM and M exponentials a row; random Fourier features: a projection and M sines and
cosines). Each process that runs the passes (the driver in process, every Dask worker) memoises the blocks the
passes multiply (:meth:`rffor.solvers.maps.FitMaps.basis_block`: Nyström's unwhitened kernel blocks, which the
gradient passes use as they are and the sums passes whiten; random features themselves) of the rows it processes,
up to the byte budget the fit sets; past it, blocks are computed as before, so the memory stays bounded whatever n
(memory flat in n beyond the budget). A block is keyed by the fit (a random key :func:`rffor.solvers.rff.fit_rff`
draws), the side of a row split, the chunk and the block's first row; the first block of a new fit drops the
entries of the previous one. A cached block is the array the feature map returned, so a fit gives the same bits
with or without the cache; callers must not modify it.

This is the one process-wide state of the library: the memo of a pure function, bounded, like
:func:`functools.lru_cache`, and lost harmlessly with a worker (its blocks are recomputed where the rows go).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np

__all__ = ["cached_block", "cache_info", "release_task"]


class _Cache:
    def __init__(self):
        self.lock = threading.Lock()
        self.fit: str | None = None
        self.entries: dict[tuple, np.ndarray] = {}
        self.nbytes = 0
        self.hits = self.misses = 0

    def get(self, key: tuple, budget: int, compute: Callable[[], np.ndarray]) -> np.ndarray:
        with self.lock:
            if key[0] != self.fit:
                self.fit, self.entries, self.nbytes, self.hits, self.misses = key[0], {}, 0, 0, 0
            hit = self.entries.get(key)
            if hit is not None:
                self.hits += 1
                return hit
            self.misses += 1
        value = compute()
        with self.lock:
            if key[0] == self.fit and self.nbytes + value.nbytes <= budget and key not in self.entries:
                value.flags.writeable = False  # a caller writing into a cached block would corrupt later passes
                self.entries[key] = value
                self.nbytes += value.nbytes
        return value


_CACHE = _Cache()


def cached_block(fit_key: str | None, budget: int, tag: str, chunk_id: int, start: int, compute) -> np.ndarray:
    """The features of one block of rows: from this process's cache, or ``compute()`` (then kept if the budget
    allows).

    Parameters
    ----------
    fit_key : str or None
        The fit's key; None (or ``budget <= 0``) computes without caching.
    budget : int
        Bytes this process may keep for the fit.
    tag : str
        Which rows of the chunk the block comes from ("all", or a side of a row split).
    chunk_id, start : int
        Chunk and first row of the block in it.
    compute : callable () -> ndarray of shape (rows, D_x)

    Returns
    -------
    ndarray of shape (rows, D_x)
        Read-only when it came from (or went into) the cache.
    """
    if fit_key is None or budget <= 0:
        return compute()
    return _CACHE.get((fit_key, tag, int(chunk_id), int(start)), int(budget), compute)


def release_task(part, p: int, chunk_ids, maps) -> None:
    """Drop this process's blocks of the fit of ``maps`` (a task run on every partition when a fit ends, so that
    workers do not hold a finished fit's features)."""
    key = getattr(maps, "cache_key", None)
    with _CACHE.lock:
        if key is not None and _CACHE.fit == key:
            _CACHE.fit, _CACHE.entries, _CACHE.nbytes = None, {}, 0


def cache_info() -> dict:
    """This process's cache: ``{"fit", "blocks", "bytes", "hits", "misses"}`` (for tests and diagnostics)."""
    c = _CACHE
    with c.lock:
        return {"fit": c.fit, "blocks": len(c.entries), "bytes": c.nbytes, "hits": c.hits, "misses": c.misses}
