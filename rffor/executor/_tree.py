"""The fixed merge tree of a reduce (MATH.md §5.2): its shape, and its fold in one process.

Both executors merge partial results by this tree: :class:`~rffor.executor.SerialExecutor` folds it here
(:func:`tree_fold`), :class:`~rffor.executor.dask.DaskExecutor` submits one task per group of the same levels.
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Callable, Sequence

__all__ = ["SPLIT_EVERY", "check_split_every", "fold_group", "sum_in_order", "tree_fold", "tree_levels"]


def sum_in_order(results):
    """``r_0 + r_1 + …`` over the results that are not None, left to right (None if there is none): the tree of a
    reduce with ``split_every >= P``."""
    return fold_group(results)


#: Default fan-in of the merge tree of a reduce (Dask's ``split_every`` for its tree reductions is 8 too): fits with
#: at most 8 partitions merge in one left fold in partition order, as before trees. On W workers the tree's depth is
#: ceil(log_s P) and its critical path (s − 1)·ceil(log_s P) merges: smaller s shortens it, larger s means fewer tasks.
SPLIT_EVERY = 8


def check_split_every(split_every) -> int:
    """``split_every`` as an int >= 2 (ValueError otherwise)."""
    if isinstance(split_every, bool) or not isinstance(split_every, numbers.Integral) or split_every < 2:
        raise ValueError(f"split_every must be an integer >= 2 (the fan-in of the merge tree), got {split_every!r}")
    return int(split_every)


def tree_levels(n: int, split_every: int) -> list[list[range]]:
    """The fixed merge tree over ``n`` leaves (partitions, in partition order), level by level.

    Level 1 groups the leaves in runs of ``split_every`` consecutive ones, each level above groups the nodes of the
    level below alike, until one node is left: the tree depends on ``n`` and ``split_every`` only.

    Parameters
    ----------
    n : int
        Leaves (P).
    split_every : int >= 2
        Fan-in s.

    Returns
    -------
    list of list of range
        ``levels[l][g]``: the nodes of level ``l`` (leaves for ``l = 0``) that group ``g`` of level ``l + 1`` merges,
        left to right. ``len(levels)`` = ceil(log_s n) is the depth (0 for one leaf); with ``s >= n`` a single group.
    """
    s = check_split_every(split_every)
    levels = []
    while n > 1:
        groups = [range(i, min(i + s, n)) for i in range(0, n, s)]
        levels.append(groups)
        n = len(groups)
    return levels


def fold_group(values, combine: Callable | None = None):
    """``combine(…combine(combine(v_0, v_1), v_2)…)`` over the values that are not None, left to right (None if
    there is none, the value itself if there is one)."""
    combine = operator.add if combine is None else combine
    total = None
    for v in values:
        if v is not None:
            total = v if total is None else combine(total, v)
    return total


def tree_fold(results: Sequence, split_every: int, combine: Callable | None = None) -> tuple[object, int]:
    """Merge per-partition results by the fixed tree of :func:`tree_levels` (in this process).

    The Dask executor merges on the workers by the same tree (:meth:`rffor.executor.dask._DaskSession.reduce`):
    groups in the same places, each folded left to right by :func:`fold_group`, None results skipped alike, so a
    reduction gives the same bits on every executor.

    Parameters
    ----------
    results : sequence
        One result per partition, in partition order (None: nothing to merge).
    split_every : int >= 2
    combine : callable, optional
        ``combine(a, b)``; default ``a + b``.

    Returns
    -------
    value
        The root (None if every result is None).
    merges : int
        Calls of ``combine`` made.
    """
    nodes = list(results)
    merges = 0
    for groups in tree_levels(len(nodes), split_every):
        nodes_up = []
        for g in groups:
            members = [nodes[i] for i in g if nodes[i] is not None]
            merges += max(0, len(members) - 1)
            nodes_up.append(fold_group(members, combine))
        nodes = nodes_up
    return (nodes[0] if nodes else None), merges
