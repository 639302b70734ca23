"""A bulk write's pieces (the index's segments, the rows' chunks) merged once, at its end: the
trailing pieces below the size limit become runs of consecutive pieces of at most that size,
so each item is copied once instead of once per merge level as the pieces arrive."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence


@contextlib.contextmanager
def deferred(owner, merge_at_end: Callable[[], None]):
    """While inside, `owner.deferring` is set (its adds leave merging alone); at the end,
    `merge_at_end()` (nested uses merge once, at the outermost end)."""
    if owner.deferring:
        yield
        return
    owner.deferring = True
    try:
        yield
    finally:
        owner.deferring = False
        merge_at_end()


def tail_runs(sizes: Sequence[int], frozen: int, limit: int) -> tuple[int, list[list[int]]]:
    """(where the trailing pieces below `limit` start, after the first `frozen`; those pieces'
    positions grouped into runs of consecutive ones of at most `limit` items, a larger piece
    alone)."""
    first = len(sizes)
    while first > frozen and sizes[first - 1] < limit:
        first -= 1
    runs: list[list[int]] = []
    size = limit
    for i in range(first, len(sizes)):
        if size + sizes[i] > limit:
            runs.append([])
            size = 0
        runs[-1].append(i)
        size += sizes[i]
    return first, runs
