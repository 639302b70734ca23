"""Bulk writes on both cores. Cutting texts into terms and 3-grams is the largest cost of a
bulk write and pure Python, so a second process does it one batch ahead: while this process
stores and indexes batch k, the worker analyses batch k + 1.

The worker is `python -m slm_magic.index.analysis_worker` over two pipes, not `multiprocessing`:
spawning through multiprocessing imports the caller's `__main__` again in the child, which
would re-run a script that has no `if __name__ == "__main__"` guard. If the worker cannot start
or dies, the batches are analysed here instead: slower, never wrong.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from .analysis import Postings

T = TypeVar("T")

#: The worker pays for itself from batches this large (it starts in about 0.3 s).
WORKER_MIN_BATCH = 10_000
ANALYSED = ("content", "title", "tags", "project", "type")


class Worker:
    """One analysis process, fed one batch at a time (a second batch is only sent once the
    first one's answer is read, so neither side can block the other on a full pipe)."""

    def __init__(self) -> None:
        env = dict(os.environ)
        # the worker imports this very package, wherever it was imported from here
        here = str(Path(__file__).resolve().parents[2])
        env["PYTHONPATH"] = os.pathsep.join([here, env["PYTHONPATH"]]) if env.get("PYTHONPATH") else here
        # glibc gives a freed large array back to the system and the next batch faults its
        # pages in again (a third of the worker's time in the kernel): keep them in its heap
        env.setdefault("MALLOC_MMAP_THRESHOLD_", str(MMAP_THRESHOLD))
        env.setdefault("MALLOC_TRIM_THRESHOLD_", str(TRIM_THRESHOLD))
        # (run from the package's own folder: `-m` puts the working directory first on the path,
        # and a notebook's folder may hold another checkout of slm_magic)
        self.proc = subprocess.Popen([sys.executable, "-m", "slm_magic.index.analysis_worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=here)
        for pipe in (self.proc.stdin, self.proc.stdout):  # a batch is megabytes: move it in big steps
            _widen(pipe)

    def send(self, columns: Mapping[str, Any]) -> None:
        pickle.dump({k: columns.get(k) for k in (*ANALYSED, "grams_only", "vectors_only", "embed_model")}, self.proc.stdin,
                    protocol=pickle.HIGHEST_PROTOCOL)
        self.proc.stdin.flush()

    def receive(self) -> Postings:
        return pickle.load(self.proc.stdout).unpacked()

    def close(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def analysed(batches: Iterable[T], columns_of: Callable[[T], Mapping[str, Any] | None],
             size_of: Callable[[T], int]) -> Iterator[tuple[T, Postings | None, bool]]:
    """(batch, its postings, whether it is the last) for each batch, in order; a batch without
    columns (`columns_of` gives None) gets None. From the second batch on, and when batches
    are large, the next batch is analysed in the worker while the caller stores this one: the
    caller's iterator is read one batch ahead (an error it raises comes after the batches
    before it, as without the read-ahead)."""
    def here(batch: T) -> Postings | None:
        columns = columns_of(batch)
        return None if columns is None else Postings.of_columns(columns)

    it = iter(batches)
    failed: list[BaseException] = []

    def pull() -> T | None:
        """The next batch; an error from the caller's iterator waits until the batches before
        it are stored (as if nothing read ahead), then ends the iteration by being raised."""
        if failed:
            return None
        try:
            return next(it, None)
        except Exception as exc:  # noqa: BLE001 - re-raised in its turn below
            failed.append(exc)
            return None

    current = pull()
    if current is None:
        if failed:
            raise failed[0]
        return
    ahead = pull()
    worker = _started(ahead is not None and size_of(current) >= WORKER_MIN_BATCH)
    sent = False
    try:
        sent, worker = _send(worker, columns_of(ahead) if ahead is not None else None)
        post = here(current)  # (the worker starts meanwhile)
        while True:
            if ahead is None:
                yield current, post, True
                if failed:
                    raise failed[0]
                return
            yield current, post, False
            current, ahead = ahead, pull()
            post = None
            if sent:
                try:
                    post = worker.receive()
                except (OSError, EOFError, pickle.UnpicklingError):
                    worker = _stop(worker)
                    post = here(current)
            else:
                post = here(current)
            sent, worker = _send(worker, columns_of(ahead) if ahead is not None else None)
    except BaseException:
        worker = _stop(worker, abandon=True)  # (it may be busy with a batch no one will store)
        raise
    finally:
        _stop(worker)


def _started(wanted: bool) -> Worker | None:
    """A worker for a bulk write whose batches are worth it (None: analysed here, as when a
    worker cannot start)."""
    if not wanted:
        return None
    try:
        return Worker()
    except OSError:
        return None


def _send(worker: Worker | None, columns: Mapping[str, Any] | None) -> tuple[bool, Worker | None]:
    """Hand a batch to the worker: (whether it took it, the worker if it still works)."""
    if worker is None or columns is None:
        return False, worker
    try:
        worker.send(columns)
        return True, worker
    except (OSError, pickle.PicklingError):
        return False, _stop(worker)


def _stop(worker: Worker | None, abandon: bool = False) -> None:
    if worker is not None:
        if abandon:
            worker.proc.kill()
        worker.close()
    return None


def _widen(pipe) -> None:
    """A pipe of PIPE_BYTES where the system allows it (Linux's default is 64 KiB: a batch then
    crosses in hundreds of steps, each a switch between the processes)."""
    try:
        import fcntl

        fcntl.fcntl(pipe.fileno(), getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (ImportError, OSError, ValueError):
        pass


#: glibc's largest mmap threshold (32 MiB on 64-bit systems): arrays under it come from the heap.
MMAP_THRESHOLD = 2**25
#: Freed heap kept for the next batch, up to this much (a batch's arrays are tens of MB).
TRIM_THRESHOLD = 2**30

#: Linux lets an unprivileged process widen a pipe to /proc/sys/fs/pipe-max-size, 1 MiB by default.
PIPE_BYTES = 2**20
