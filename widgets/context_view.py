"""What `%slm_start` shows: the session, banners, earlier sessions, the memories, the context block."""

from __future__ import annotations

import html
from typing import TYPE_CHECKING

import ipywidgets as W
from IPython.display import Markdown

from slm_magic.core.scoring import AGE_GATE_RELEVANCE
from slm_magic.results.display import (FAINT, INK, MUTED, PIN, age_gate_words, learning_words, mode_words, one_line,
                                       plural, session_html, session_text, when_text)
from slm_magic.results.models import SessionInit

from .memories_view import MemoriesView
from .saved_form import SavedForm
from .search_view import LiveSearch

if TYPE_CHECKING:  # pragma: no cover
    from slm_magic.memory import Memory

_BANNER = "padding:4px 10px;border-radius:4px;margin:2px 0;border-left:4px solid {0};background:{1};color:#1f2328"


PIN_ICON = "<i class='fa fa-thumb-tack' title='pinned: in every session context'></i>"


def _banner(text: str, shown: bool, edge: str, fill: str) -> W.HTML:
    return W.HTML(f"<div style='{_BANNER.format(edge, fill)}'>{text}</div>",
                  layout=W.Layout(display=None if shown else "none"))


class ContextView(SavedForm, W.VBox):
    """A session as it opens: id (new or continued), learning phase, degraded / abstained
    banners, earlier sessions as a short timeline, then the memories (SearchScore table) and
    the ready-to-paste context block (rendered markdown), and a live search on demand."""

    def __init__(self, init: SessionInit, *, memory: "Memory | None" = None, limit: int = 10):
        self.init, self.memory = init, memory
        learn = init.learning
        state = "new session" if init.is_new else "continued session"
        confidence = (f"<span style='color:{MUTED}' title='answer confidence, calibrated by "
                      f"{html.escape(init.calibration_id or '')}'>confidence the memories answer: "
                      f"{init.answer_confidence:.0%}</span>" if init.answer_confidence is not None else "")
        self.header = W.HTML(
            f"<div style='display:flex;gap:14px;align-items:baseline;flex-wrap:wrap'>"
            f"<span style='font-size:14px'><b>{state}</b> <code>{html.escape(init.session_id)}</code></span>"
            f"<span style='color:{MUTED}' title='{html.escape(mode_words(init.retrieval_mode, technical=True))}'>"
            f"{plural(init.memory_count, 'memory', 'memories')}</span>"
            f"<span style='color:{MUTED}' title='learning phase {learn.phase}: {html.escape(learn.status)}; ranked by: "
            f"{html.escape(learn.ranking)}{', ' + html.escape(learn.model_id) if learn.model_id else ''}'>"
            f"{html.escape(learning_words(learn))}</span>{confidence}</div>")
        self.header.add_class("slm-caption")
        self.degraded_banner = _banner(
            "<b>slower path</b>: the in-memory index was not available, so the memories were ranked from the file "
            "by shared words alone.", init.degraded_mode, "#b00", "#fdecea")
        self.empty_banner = _banner(
            "<b>no memories yet</b>: what you keep with <code>%%remember</code> comes back here in your next "
            "sessions.", init.nothing_stored, "#2563eb", "#eff6ff")
        self.abstained_banner = _banner(
            f"<b>nothing here answers this session's question well</b>: {html.escape(init.abstention_reason or '')}",
            init.abstained and not init.nothing_stored, "#d97706", "#fff7e6")
        self.abstained_banner.tooltip = "abstained"
        self.question_banner = _banner(html.escape(init.message or ""), bool(init.message), "#374151", "#f3f4f6")
        gate = init.age_gate
        held = gate is not None and gate[1] > 0 and not init.nothing_stored
        self.age_gate_note = W.HTML(
            "" if not held else
            f"<div style='color:{MUTED};font-size:12px' title='the age gate: max_age_days={gate[0]}, relevance ≥ "
            f"{AGE_GATE_RELEVANCE:.2f} to pass'>{html.escape(age_gate_words(*gate))}</div>",
            layout=W.Layout(display=None if held else "none"))
        recent = init.recent_sessions
        self.timeline = W.HTML(
            f"<div style='color:{INK};font-size:12px'><b>earlier sessions</b>" + "".join(
                f"<div>"
                f"<span style='font-variant-numeric:tabular-nums;color:{FAINT}'>{when_text(s.date)}</span> "
                f"{html.escape(one_line(s.summary, 160))}</div>" for s in recent) + "</div>",
            layout=W.Layout(display=None if recent else "none"))
        self.memories = MemoriesView(init.scored_memories, memory=memory, session_id=init.session_id,
                                     caption=f"<span style='color:{MUTED}'>score: how well each memory answers "
                                             "this session's question (pinned ones always come)</span>"
                                     if not init.opened_without_question else
                                     f"<span style='color:{MUTED}'>no question: pinned memories, then the newest</span>")
        self.memories.on_change = self.resave
        self.context_block = W.Output()
        # (the pin as the icon of the pin buttons: an emoji font may be missing)
        self.context_block.append_display_data(Markdown(init.context.replace(PIN, PIN_ICON)))
        # (no width: a child stretches to the view less its margins; 100% plus margins would
        # overflow and draw a scrollbar under the output)
        self.tabs = W.Tab([self.memories, self.context_block])
        self.tabs.titles = ("memories", "context block")
        self.search_button = W.Button(description="search memories", icon="search",
                                      layout=W.Layout(width="160px"), disabled=memory is None)
        self.search_button.on_click(lambda _: self.open_search())
        self.search: LiveSearch | None = None
        self.search_area = W.VBox(layout=W.Layout(width="100%"))
        self._limit = limit
        super().__init__([self.header, self.degraded_banner, self.empty_banner, self.abstained_banner,
                          self.question_banner, self.age_gate_note,
                          self.timeline, self.tabs,
                          self.search_button, self.search_area], layout=W.Layout(width="100%"))

    def open_search(self) -> LiveSearch | None:
        if self.memory is None:
            return None
        if self.search is None:
            self.search = LiveSearch(self.memory, session_id=self.init.session_id, limit=self._limit)
            self.search_area.children = [self.search]
        return self.search

    def saved_html(self) -> str:
        """The session as it opened, its table as the rows now show it (a memory pinned, forgotten)."""
        shown = self.init.model_copy(update={"scored_memories": self.memories.shown_memories()})
        return session_html(shown, self.memories.viewer)

    def __repr__(self) -> str:
        return session_text(self.init)
