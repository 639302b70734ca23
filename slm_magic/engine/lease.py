"""How this process holds the memory file: for good (a script's `with Memory(...)`), or only
while a magic, a tool call or a request runs (`attached`), so that kernels, the MCP server and
the lab panel share one file. A part of `Memory`, held as `memory.lease`."""

from __future__ import annotations

import contextlib
import time

from ..index.live import LiveIndex
from .settings import Settings
from .working_sets import WorkingSets


class Lease:
    def __init__(self, store, settings: Settings, live: LiveIndex, working_sets: WorkingSets):
        self.store = store
        self.settings = settings
        self.live = live
        self.working_sets = working_sets
        self.sharing = False  # inside `attached`, having opened the file: a long write lets it go between batches

    @contextlib.contextmanager
    def attached(self):
        """Hold the file only inside this block: opened on entry if needed, caught up with other
        processes' writes, let go on exit."""
        with self.store.lock:  # (the vector fill's thread opens the file for a step, and closes what it opened)
            opened = not self.store.connected
            if opened:
                self.store.connect()
                self.sharing = True
        try:
            if self.live.index is None:  # degraded earlier: try the index again
                cfg = self.settings.config
                self.live.load(cfg.k1, cfg.b, self.settings.model)
            self.live.refresh()
            yield
        finally:
            self.live.start_checks()
            if opened:
                self.sharing = False
                try:
                    if self.working_sets.pending >= WorkingSets.PENDING_MAX // 4:
                        self.working_sets.flush()  # (a few showings wait for the next write or close)
                    self.live.save_soon()
                finally:
                    self.store.disconnect()

    def yield_file(self) -> None:
        """Between batches of a long write inside `attached`: let a waiting kernel in."""
        self.working_sets.flush()
        self.store.disconnect()
        time.sleep(0.25)  # longer than a waiting kernel's backoff step
        self.store.connect()
        self.live.refresh()

    def detach(self) -> None:
        """Let go of the file between calls (see `attached`)."""
        if self.store.connected:
            self.working_sets.flush()
            self.live.save_soon()
        self.store.disconnect()
