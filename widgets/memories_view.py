"""The memories table: one row per memory with its score bar, and 👍 / 👎 / pin / forget.

Actions go through `Memory`'s public methods inside `Memory.attached()` (the file is held
only while an action runs, as in the magics); the row then updates in place. A memory
forgotten elsewhere (another output, another kernel, `%slm_forget`) is said to be forgotten,
and its row greyed out, when an action finds it gone.
"""

from __future__ import annotations

import html
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING

import ipywidgets as W

from slm_magic.results.display import (CORE_BADGE, ERROR, FAINT, INK, MUTED, SCORE_FORMULA, STRENGTH_WORDS, age_text,
                                       author_text, marked_html, memories_html, mode_words, one_line, origin_html, plural,
                                       recall_html, recall_text, when_text)
from slm_magic.errors import SlmMagicError
from slm_magic.results.models import Fact, RecallResult, ScoredMemory

from .saved_form import SavedForm
from .score_bars import breakdown, stacked_bar

if TYPE_CHECKING:  # pragma: no cover
    from slm_magic.memory import Memory

# rank · score · the memory (its text, then a line of type, tags, when, where, id) · actions.
# The memory column takes what is left; the actions column is as wide as its buttons (or the
# forget question), so it is never pushed off-screen. Below 560 px of output width the actions
# move under the memory (a container query: the width that matters is the output area's).
COLUMNS = "28px 112px minmax(0, 1fr) max-content"
HEADINGS = ["#", "score", "memory", ""]
HEADING_TIPS = {"score": f"{SCORE_FORMULA} (hover a bar for its sum; “score parts” shows each part)"}
_CELL = "overflow:hidden;text-overflow:ellipsis;white-space:nowrap"
_META = f"color:{MUTED};font-size:12px;line-height:1.5;white-space:normal;overflow-wrap:anywhere"
# A memory's text: two lines, and "more" at the end of the second when there is more (a float
# pushed down to the last visible line; a cover placed just after the text's end hides it
# when the whole text fits). A click opens the text in place and folds it again.
LINE = "1.35em"
TEXT_CSS = (f".slm-wrap{{display:flex}}.slm-text{{position:relative;max-height:calc(2 * {LINE});line-height:{LINE};"
            f"overflow:hidden;cursor:pointer;overflow-wrap:anywhere}}"
            f".slm-text::before{{content:'';float:right;height:calc(100% - {LINE})}}"
            f".slm-text::after{{content:'';position:absolute;width:100%;height:{LINE};"
            f"background:var(--jp-layout-color0,#fff)}}"
            # (in a tab, as %slm_start shows it, the cover takes the tab's own colour)
            ".widget-tab-contents .slm-text::after{background:var(--jp-layout-color1,#fff)}"
            ".slm-more{float:right;clear:both;margin-left:6px;color:var(--jp-brand-color1,#1976d2);font-size:12px}"
            ".slm-more::before{content:'… more'}.slm-text.slm-open{max-height:none}"
            ".slm-text.slm-open::before{display:none}.slm-text.slm-open .slm-more::before{content:'less'}")
# ipywidgets' HTML content box would otherwise grow with its text instead of clipping it.
GRID_CSS = ("<style>.slm-grid .widget-html, .slm-grid .widget-html-content{min-width:0;overflow:hidden}"
            ".slm-grid .widget-html-content{width:100%}"
            ".slm-table{container-type:inline-size;width:100%}"
            "@container (max-width: 560px){.slm-table .slm-grid{grid-template-columns:28px minmax(0,1fr) !important;"
            "row-gap:2px !important}.slm-table .slm-grid > .slm-score{grid-column:2}"
            ".slm-table .slm-grid > .slm-memory, .slm-table .slm-grid > .slm-actions{grid-column:1 / -1}"
            ".slm-table .slm-grid > .slm-heading-blank, .slm-table .slm-grid > .slm-heading-memory{display:none}"
            ".slm-table .slm-grid > .slm-actions{min-width:0 !important;flex-wrap:wrap}}"
            ".slm-id{font-family:var(--jp-code-font-family,monospace);user-select:all;"
            "background:var(--jp-layout-color2,#f3f4f6);border-radius:3px;padding:0 3px}"
            f".slm-copy{{border:none;background:none;cursor:pointer;color:{MUTED};padding:0 2px;font-size:12px}}"
            ".slm-tag{color:#1e3a8a;background:#eef2ff;border-radius:3px;padding:0 4px;white-space:nowrap}"
            # (a caption that wraps reads as lines of text, not lines a button's height apart)
            ".slm-caption > .widget-html-content{line-height:1.4;padding:3px 0}"
            + TEXT_CSS + "</style>")
SHORT_ID = 8  # characters of an id shown in a row (any 6+ character prefix is accepted back)
SHOWN_CHARS = 5000  # of a memory's text, in its row (opened in place); `mem.get(id)` has the rest


def _cell(text: str, *, title: str | None = None, style: str = "") -> str:
    tip = f" title='{html.escape(title)}'" if title else ""
    return f"<div{tip} style='{_CELL};{style}'>{text}</div>"


def _grid(cells: list[W.Widget]) -> W.GridBox:
    grid = W.GridBox(cells, layout=W.Layout(grid_template_columns=COLUMNS, grid_gap="0 8px", align_items="flex-start",
                                            width="100%", padding="2px 0"))
    grid.add_class("slm-grid")
    return grid


def _html(value: str = "", **layout) -> W.HTML:
    """A grid cell: clipped to its column (long text ends in an ellipsis, never overflows)."""
    return W.HTML(value, layout=W.Layout(min_width="0", margin="0", overflow="hidden", **layout))


MARK = "background:#fff3a3;color:#1f2328;padding:0 1px;border-radius:2px"
# What a match's strength looks like: a strong one stands out, a weak one looks weak.
STRENGTH = {"strong": (STRENGTH_WORDS["strong"], "#166534", "#dcfce7"),
            "partial": (STRENGTH_WORDS["partial"], "#1e3a8a", "#e0e7ff"),
            "weak": (STRENGTH_WORDS["weak"], "#6b7280", "#f3f4f6"),
            "related": (STRENGTH_WORDS["related"], "#6b7280", "#f3f4f6"),
            "listed": ("newest", "#374151", "#f3f4f6")}


def _marked(text: str, terms) -> str:
    return marked_html(text, terms, MARK)


def strength_chip(item: ScoredMemory) -> str:
    """The match in words (with its relevance), or what a related memory is related to."""
    label, fg, bg = STRENGTH[item.strength]
    if item.strength == "listed":  # (shown without a question: no match to speak of)
        tip = "shown because no question was given: pinned memories and the newest ones"
        return (f"<span class='slm-match slm-match-listed' title='{tip}' style='color:{fg};background:{bg};"
                f"border-radius:3px;padding:0 4px'>{'pinned' if item.fact.is_core else label}</span>")
    detail = item.reason if item.strength == "related" else f"{item.relevance:.2f}"
    tip = (f"relevance {item.relevance:.3f}; matched {item.reason}" if item.strength != "related"
           else f"shown because it was written in the same session as result {item.related_to}; it does not "
                "match the question itself")
    return (f"<span class='slm-match slm-match-{item.strength}' title='{html.escape(tip)}' "
            f"style='color:{fg};background:{bg};border-radius:3px;padding:0 4px'>{label} {html.escape(detail)}</span>")


def short_id(fact_id: str) -> str:
    return fact_id[:SHORT_ID]


def id_chip(fact_id: str) -> str:
    """The short id, selectable, with a button that copies the whole id to the clipboard."""
    fid = html.escape(fact_id)
    return (f"<span class='slm-id' title='id {fid} (any 6 or more of its first characters work in "
            f"%slm_pin, %slm_forget …)'>{html.escape(short_id(fact_id))}</span>"
            f"<button class='slm-copy' title='copy the id' "
            f"onclick=\"navigator.clipboard && navigator.clipboard.writeText('{fid}')\"><i class='fa fa-clone'></i>"
            f"</button>")


class MemoryRow:
    """The widgets of one memory's row, kept so that an action can update them in place."""

    def __init__(self, table: "MemoriesView", rank: int, item: ScoredMemory):
        self.table, self.rank, self.item = table, rank, item
        self.fact: Fact = item.fact
        self.forgotten = False
        self.signal: str | None = None  # the last feedback given here: "up" or "down"
        self.rank_cell = _html(_cell(str(rank), style=f"color:{FAINT};text-align:right"))
        self.bar = _html(stacked_bar(item.score))
        self.bar.add_class("slm-score")
        self.text = _html()
        self.meta = _html()
        self.origin_button = W.Button(description="where from", icon="code",
                                      tooltip="the notebook, the cell and the code that produced this memory",
                                      layout=W.Layout(width="auto", height="22px", padding="0 6px", margin="0"))
        self.origin_button.on_click(lambda _: self.toggle_origin())
        self.origin_button.disabled = self.table.memory is None
        self.memory_cell = W.VBox([self.text, W.Box([self.meta, self.origin_button],
                                                    layout=W.Layout(flex_flow="row wrap", align_items="center",
                                                                    min_width="0"))],
                                  layout=W.Layout(min_width="0"))
        self.memory_cell.add_class("slm-memory")
        # Icons from the font JupyterLab ships (an emoji font may be missing on the machine).
        self.up = self._button("thumbs-up", "👍 useful: a positive feedback signal", lambda _: self.feedback("up"))
        self.down = self._button("thumbs-down", "👎 not useful: a negative feedback signal",
                                 lambda _: self.feedback("down"))
        self.pin = self._button("thumb-tack", "pin: always in a session's context", lambda _: self.toggle_pin())
        self.forget = self._button("trash", "forget this memory for good", lambda _: self.ask_forget())
        self.actions = W.HBox([self.up, self.down, self.pin, self.forget],
                              layout=W.Layout(min_width="max-content", align_items="center"))
        self.actions.add_class("slm-actions")
        self.parts = _html(breakdown(item.score), display="none")
        self.origin = _html(display="none")
        self.refresh()

    def _button(self, icon: str, tip: str, on_click) -> W.Button:
        b = W.Button(description="", icon=icon, tooltip=tip,
                     layout=W.Layout(width="32px", height="26px", padding="0", margin="0 1px"))
        b.on_click(on_click)
        b.disabled = self.table.memory is None
        return b

    @property
    def cells(self) -> list[W.Widget]:
        return [self.rank_cell, self.bar, self.memory_cell, self.actions]

    def widget(self) -> W.VBox:
        """The row's cells on the table's column grid; its score parts and origin below them."""
        return W.VBox([_grid(self.cells), self.parts, self.origin], layout=W.Layout(width="100%"))

    def refresh(self) -> None:
        """Redraw from `self.fact` (after a pin, unpin or forget)."""
        f, terms = self.fact, self.item.query_terms
        head = f"<b>{_marked(one_line(f.title, 80), terms)}</b> · " if f.title else ""
        style = "text-decoration:line-through;color:var(--jp-ui-font-color3,#999)" if self.forgotten else (
            f"color:{MUTED}" if self.item.strength in ("weak", "related") else "")
        tip = f.content if len(f.content) < 2000 else f.content[:2000] + "…"
        # (the whole text, opened in place by a click; the browser folds it to two lines)
        self.text.value = (f"<div class='slm-wrap'><div class='slm-text' title='{html.escape(tip)}' style='{style}' "
                           "onclick=\"if(!String(getSelection()))this.classList.toggle('slm-open')\">"
                           "<span class='slm-more' title='read it all, or fold it again'></span>"
                           f"{CORE_BADGE if f.is_core else ''}{head}{_marked(one_line(f.content, SHOWN_CHARS), terms)}"
                           "</div></div>")
        colour = "var(--jp-warn-color0,#7a4f01)" if f.type in ("decision", "preference", "profile") else INK
        parts = [strength_chip(self.item), f"<span style='color:{colour}'>{_marked(f.type, terms)}</span>"]
        if self.item.similar and self.item.strength not in ("related", "listed"):  # (as the text and HTML say it)
            parts.insert(1, "<span class='slm-similar' title=\"its meaning is close to the question's, whatever "
                            "words it shares\">similar meaning</span>")
        if self.forgotten:
            parts.insert(0, f"<span class='slm-forgotten' style='color:{ERROR}'>forgotten</span>")
        if f.tags:
            parts.append(" ".join(f"<span class='slm-tag'>{_marked(t, terms)}</span>" for t in f.tags))
        parts.append(f"<span title='updated {when_text(f.updated_at)}'>{age_text(f.updated_at)}</span>")
        if f.notebook or f.cell is not None:
            name = (f.notebook or "").rsplit("/", 1)[-1]
            where = f"{name} [{f.cell}]" if f.cell is not None else name
            parts.append(f"<span title='{html.escape(f.notebook or '')}'>{html.escape(where)}</span>")
        if f.shared:
            parts.append(f"<span title='shared: everyone on this memory finds it'>"
                         f"{html.escape(author_text(f, self.table.viewer))}</span>")
        parts.append(id_chip(f.fact_id))
        self.meta.value = f"<div class='slm-meta' style='{_META}'>{' · '.join(parts)}</div>"
        self.pin.button_style = "warning" if f.is_core else ""
        self.pin.tooltip = "unpin: an ordinary memory again" if f.is_core else "pin: always in a session's context"
        if self.forgotten:
            for b in (self.up, self.down, self.pin, self.forget, self.origin_button):
                b.disabled = True
        elif self.table.memory is not None and f.user_id != self.table.viewer:
            for b in (self.pin, self.forget):  # someone else's shared memory: found and read, never owned
                b.disabled = True
                b.tooltip = f"{author_text(f)}: only its author can pin or forget it"

    def toggle_origin(self) -> None:
        """Where the memory came from, read from the file when asked (the code is not held)."""
        if self.origin.layout.display != "none":
            self.origin.layout.display = "none"
            return
        got: list = []
        if self.table.act(lambda mem: got.append(mem.provenance(self.fact.fact_id)), "", row=self):
            if got[0] is None:  # (no error for a memory that is gone: nothing to show)
                self.table.forgotten_elsewhere(self)
                return
            self.origin.value = origin_html(got[0])
            self.origin.layout.display = None

    # --- actions ----------------------------------------------------------------------------
    def feedback(self, signal: str) -> None:
        def act(mem: "Memory") -> None:
            mem.feedback(self.fact.fact_id, signal, session_id=self.table.session_id, query=self.table.query,
                         rank=self.rank, project=self.table.project)
        said = "marked useful" if signal == "up" else "marked not useful"
        if self.table.act(act, f"{said}: “{one_line(self.fact.content, 50)}”", row=self):
            self.signal = signal
            self.up.button_style = "success" if signal == "up" else ""
            self.down.button_style = "danger" if signal == "down" else ""
            self.up.disabled, self.down.disabled = signal == "up", signal == "down"

    def toggle_pin(self) -> None:
        core = not self.fact.is_core
        got: list[Fact] = []
        if self.table.act(lambda mem: got.append(mem.pin(self.fact.fact_id, core)),
                          f"{'pinned' if core else 'unpinned'} “{one_line(self.fact.content, 50)}”", row=self):
            self.fact = got[0]
            self.refresh()
            self.table.resave()

    def ask_forget(self) -> None:
        """Forgetting cannot be undone: ask first, in the row (the buttons wrap under the
        question where the row is narrow)."""
        yes = W.Button(description="forget", button_style="danger",
                       layout=W.Layout(width="auto", height="26px", padding="0 8px", flex="0 0 auto"))
        no = W.Button(description="keep", layout=W.Layout(width="auto", height="26px", padding="0 8px",
                                                          flex="0 0 auto"))
        yes.on_click(lambda _: self.confirm_forget())
        no.on_click(lambda _: self._restore_actions())
        self.actions.children = [W.HTML(f"<span style='color:{ERROR};white-space:nowrap'>forget for good?</span>",
                                        layout=W.Layout(margin="0 4px", min_width="max-content")), yes, no]

    def confirm_forget(self) -> None:
        if self.table.act(lambda mem: mem.forget(self.fact.fact_id), f"forgot “{one_line(self.fact.content, 50)}”",
                          row=self):
            for row in rows_showing(self.table.memory, self.fact.fact_id):  # this row and its twins elsewhere
                row.mark_forgotten()
                row.table.resave()
        else:
            self._restore_actions()

    def mark_forgotten(self) -> None:
        """Greyed out, struck through, its actions off: the memory is no longer in the file."""
        self.forgotten = True
        self._restore_actions()
        self.refresh()

    def _restore_actions(self) -> None:
        self.actions.children = [self.up, self.down, self.pin, self.forget]


#: Every table shown in this kernel, so that a memory forgotten in one greys out in the others.
_TABLES: "weakref.WeakSet[MemoriesView]" = weakref.WeakSet()


def rows_showing(memory: "Memory", fact_id: str) -> list[MemoryRow]:
    """The rows of `fact_id` in every table over the same memory file."""
    def same(other: "Memory | None") -> bool:
        return other is memory or (other is not None and other.path == memory.path != ":memory:")

    return [r for t in list(_TABLES) if same(t.memory) for r in t.rows if r.fact.fact_id == fact_id]


class MemoriesView(SavedForm, W.VBox):
    """Recalled memories, best first: a SearchScore bar per row, its parts on demand."""

    def __init__(self, memories: Sequence[ScoredMemory], *, memory: "Memory | None" = None,
                 session_id: str | None = None, query: str | None = None, project: str | None = None,
                 caption: str = ""):
        self.memory, self.session_id, self.query, self.project = memory, session_id, query, project
        self.viewer = memory.user_id if memory is not None else None  # whose "shared by you" it is
        self.result: RecallResult | None = None
        self.on_change = None  # the view this table is part of, told to resave when a row changes
        self.items = list(memories)
        self.caption = _html(GRID_CSS + caption)
        self.caption.add_class("slm-caption")
        self.rows = [MemoryRow(self, i, m) for i, m in enumerate(self.items, 1)]
        head = [_html(_cell(h, title=HEADING_TIPS.get(h),
                            style=f"font-weight:600;color:{INK}" + (";text-align:right" if h == "#" else "")))
                for h in HEADINGS]
        head[-1].add_class("slm-heading-blank")
        head[2].add_class("slm-heading-memory")
        # One grid per row on the same column template: the columns line up across rows, and
        # a row's score parts can open below it without disturbing the others.
        self.grid = W.VBox([_grid(head), *(r.widget() for r in self.rows)], layout=W.Layout(width="100%"))
        self.grid.add_class("slm-table")
        self.show_parts = W.ToggleButton(description="score parts", value=False,
                                         tooltip="show each score's parts: bm25, tfidf, meaning, recency, revision",
                                         layout=W.Layout(width="auto", flex="0 0 auto", padding="0 10px"))
        self.show_parts.observe(self._toggle_parts, "value")
        self.status = _html()
        self.status.add_class("slm-caption")
        empty = _html(f"<i style='color:{FAINT}'>No memory matched.</i>") if not self.items else None
        body = [empty] if empty else [self.grid]
        # (the caption goes under the button where the two do not fit side by side)
        super().__init__([W.HBox([self.show_parts, self.caption], layout=W.Layout(align_items="center",
                                                                                 flex_flow="row wrap")),
                          *body, self.status], layout=W.Layout(width="100%"))
        _TABLES.add(self)

    @classmethod
    def of(cls, result: RecallResult, *, memory: "Memory | None" = None, session_id: str | None = None,
           summary: bool = True) -> "MemoriesView":
        """The table of a recall; `summary=False` leaves out the count and time (a live search
        shows them beside its box)."""
        said = (f" · {plural(len(result.memories), 'memory', 'memories')} · {result.elapsed_ms:.1f} ms"
                if summary else "")
        cap = (f"<span style='color:{INK}' title='{html.escape(mode_words(result.retrieval_mode, technical=True))}'>"
               f"recall <b>{html.escape(result.query)}</b>{said}</span>")
        view = cls(result.memories, memory=memory, session_id=session_id, query=result.query, project=result.project,
                   caption=cap)
        view.result = result
        return view

    def _toggle_parts(self, change) -> None:
        for r in self.rows:
            r.parts.layout.display = None if change["new"] else "none"

    def act(self, action, done: str, *, row: MemoryRow | None = None) -> bool:
        """Run one action on the memory file; say what happened (or why not) under the table.
        An action on `row` that fails because its memory is gone says it was forgotten."""
        if self.memory is None:
            self.status.value = f"<span style='color:{ERROR}'>read-only view: no memory to act on</span>"
            return False
        try:
            with self.memory.attached():
                action(self.memory)
        except SlmMagicError as exc:
            if row is not None and self._gone(row.fact.fact_id):
                self.forgotten_elsewhere(row)
            else:
                self.status.value = f"<span style='color:{ERROR}'>{html.escape(str(exc))}</span>"
            return False
        if done:
            self.status.value = f"<span style='color:{MUTED}'>{html.escape(done)}</span>"
        return True

    def _gone(self, fact_id: str) -> bool:
        try:
            with self.memory.attached():
                return self.memory.readable(fact_id) is None
        except SlmMagicError:
            return False

    def forgotten_elsewhere(self, row: MemoryRow) -> None:
        row.mark_forgotten()
        self.resave()
        self.status.value = (f"<span style='color:{ERROR}'>this memory was forgotten (in another output, another "
                             f"kernel or by %slm_forget): “{html.escape(one_line(row.fact.content, 50))}”</span>")

    def resave(self) -> None:
        super().resave()
        if self.on_change is not None:
            self.on_change()

    def shown_memories(self) -> list[ScoredMemory]:
        """The memories as the rows now show them (pinned or unpinned; forgotten ones left out)."""
        return [r.item.model_copy(update={"fact": r.fact}) for r in self.rows if not r.forgotten]

    def saved_html(self) -> str:
        if self.result is None:
            return memories_html(self.shown_memories(), self.viewer)
        return recall_html(self._shown_result(), self.viewer, forgotten=self.forgotten_count)

    def __repr__(self) -> str:  # the saved form's text
        if self.result is None:
            return plural(len(self.items), "memory", "memories")
        return recall_text(self._shown_result(), viewer=self.viewer, forgotten=self.forgotten_count)

    def _shown_result(self):
        """The recall as the rows now show it (`shown_memories`)."""
        return self.result.model_copy(update={"memories": self.shown_memories()})

    @property
    def forgotten_count(self) -> int:
        """How many of the rows were forgotten since they were shown (left out of the saved form)."""
        return sum(r.forgotten for r in self.rows)
