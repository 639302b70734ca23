"""The live search box: memories re-ranked as the user types, with the time each query took."""

from __future__ import annotations

import asyncio
import html
import time
from typing import TYPE_CHECKING

import ipywidgets as W

from slm_magic.errors import SlmMagicError
from slm_magic.results.display import ERROR, MUTED, plural

from .memories_view import MemoriesView
from .saved_form import SavedForm

if TYPE_CHECKING:  # pragma: no cover
    from slm_magic.memory import Memory


FULL_WIDTH = "calc(100% - 2 * var(--jp-widgets-margin, 2px))"  # a control's width, its margins inside the row


class LiveSearch(SavedForm, W.VBox):
    """A search box over one memory. Keystrokes are debounced on the kernel's event loop: only
    the text that stays `debounce_s` unchanged is searched. Searches here do not count as the
    session's showings (a prefix typed on the way is not a question asked)."""

    def __init__(self, memory: "Memory", *, session_id: str | None = None, limit: int = 10,
                 query: str = "", debounce_s: float = 0.25, type: str | None = None, project: str | None = None,
                 related: bool = False):
        """`type`, `project`, `related`: what every search here asks besides the query (as
        `Memory.recall` takes them), as `%recall`'s options given with no query."""
        self.memory, self.session_id, self.limit, self.debounce_s = memory, session_id, limit, debounce_s
        self.options = {"type": type, "project": project, "related": related}
        self.box = W.Text(value=query, placeholder="search your memories…", continuous_update=True,
                          layout=W.Layout(width="420px", max_width=FULL_WIDTH))
        # (beside the box while there is room for it, else under it: never squeezed word by word)
        self.timing = W.HTML(layout=W.Layout(margin="0 0 0 8px", flex="1 1 14em"))
        self.timing.add_class("slm-caption")
        self.results = W.VBox(layout=W.Layout(width="100%"))
        self.view: MemoriesView | None = None
        self.searches: list[tuple[str, float]] = []  # (query, milliseconds) of each search run
        self._pending: asyncio.Task | None = None
        self.box.observe(self._typed, "value")
        super().__init__([W.HBox([self.box, self.timing], layout=W.Layout(align_items="center", flex_flow="row wrap")),
                          self.results],
                         layout=W.Layout(width="100%"))
        if query.strip():
            self.search(query)

    @property
    def pending(self) -> asyncio.Task | None:
        """The search the last keystroke scheduled, until it runs: something to await (a test
        waits on it instead of guessing how long the debounce takes)."""
        return self._pending

    def _typed(self, change) -> None:
        if self._pending is not None:
            self._pending.cancel()
            self._pending = None
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a script, a test): search at once
            self.search(change["new"])
            return
        self._pending = loop.create_task(self._search_once_typing_stops())

    async def _search_once_typing_stops(self) -> None:
        await asyncio.sleep(self.debounce_s)  # cancelled by the next keystroke
        self._pending = None
        self.search(self.box.value)

    def search(self, query: str) -> MemoriesView | None:
        """Rank the memories for `query` now and show them; returns the new table."""
        query = query.strip()
        if not query:
            self.results.children, self.timing.value, self.view = [], "", None
            self.resave()
            return None
        started = time.perf_counter()
        try:
            with self.memory.attached():
                result = self.memory.recall(query, limit=self.limit, **self.options)
        except SlmMagicError as exc:
            self.timing.value = f"<span style='color:{ERROR}'>{html.escape(str(exc))}</span>"
            return None
        took = (time.perf_counter() - started) * 1000
        self.searches.append((query, took))
        self.view = MemoriesView.of(result, memory=self.memory, session_id=self.session_id, summary=False)
        self.view.on_change = self.resave
        self.results.children = [self.view]
        self.timing.value = (f"<span style='color:{MUTED};font-variant-numeric:tabular-nums'>"
                             f"{plural(len(result.memories), 'memory', 'memories')} in {took:.1f} ms</span>")
        self.resave()
        return self.view

    def saved_html(self) -> str:
        """What was last searched here, as the table a recall shows (a saved notebook keeps it)."""
        head = f"<div style='color:{MUTED}'>live search over {html.escape(self.memory.path)}</div>"
        if self.view is None or self.view.result is None:
            return head + "<div><i>nothing searched</i></div>"
        return head + self.view.saved_html()

    def __repr__(self) -> str:
        head = f"live search over {self.memory.path}"
        if self.view is None or self.view.result is None:
            return head + ": nothing searched"
        return f"{head}\n{self.view!r}"
