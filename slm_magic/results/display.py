"""Plain renderings of results: an HTML table for notebooks, a text table for terminals.

Pure functions of the engine's models, which they read by attribute (a RecallResult, a
SessionInit, a LearningStatus, a Provenance) and never import, and no IPython: the models'
`_repr_html_` and `__str__` call them; in a kernel the widgets show live views, each after
its saved form made from these (what a saved notebook shows with no kernel, on GitHub, through
nbconvert). A `viewer` (a user id) makes that user's own shared memories "shared by you".
"""

from __future__ import annotations

import html
import re
import shutil
import textwrap
from datetime import datetime

from ..core.clock import local, utcnow
from ..core.scoring import AGE_GATE_RELEVANCE, SEARCH_WEIGHTS, WEAK_RELEVANCE

# The views' text colours: JupyterLab's theme variables (a dark theme's text is light), with the
# light theme's greys where there are none (a saved notebook read elsewhere). A fixed colour
# stands only on a background of its own (a matched word, a chip, a banner).
INK = "var(--jp-ui-font-color1,#333)"
MUTED = "var(--jp-ui-font-color2,#555)"
FAINT = "var(--jp-ui-font-color2,#777)"
ERROR = "var(--jp-error-color1,#b00)"

# (the class twice: JupyterLab's own table rules are one class more specific than `.slm-t td`)
_CSS = ("<style>.slm-t.slm-t{border-collapse:collapse;font-size:12px}.slm-t.slm-t td,.slm-t.slm-t th{padding:3px 8px;"
        "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}.slm-t.slm-t td.n{text-align:right;"
        "white-space:nowrap;font-variant-numeric:tabular-nums}</style>")
# Inline, as GitHub and an untrusted notebook drop <style>: the bars and the text's alignment.
_LEFT = "style='text-align:left'"
_NUMBER = "class=n style='text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums'"
_BAR = "display:inline-block;height:8px;background:#4c78a8;vertical-align:middle"


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 memory', '3 memories'."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def age_gate_words(days: int | None, older: int, shown: int) -> str:
    """What the age gate did, in one sentence ("" when no match was older than it): how many
    matches are older than `days`, and which of them are shown (they match strongly) or left out."""
    if not days or not older:
        return ""
    out = max(0, older - shown)
    if not shown:
        return (f"older than {days} days: {plural(out, 'matching memory', 'matching memories')} left out unless "
                f"{'it matches' if out == 1 else 'they match'} the question strongly")
    strong = f"shown because {'it matches' if shown == 1 else 'they match'} the question strongly"
    if not out:
        return f"older than {days} days: {plural(shown, 'matching memory', 'matching memories')}, {strong}"
    return (f"older than {days} days: {plural(older, 'matching memory', 'matching memories')}; {shown:,} {strong}, "
            f"{out:,} left out")


def when_text(dt: datetime) -> str:
    """A stored time (UTC) as the reader's clock shows it, to the minute."""
    return f"{local(dt):%Y-%m-%d %H:%M}"


def age_text(dt: datetime, now: datetime | None = None) -> str:
    now = now or utcnow()
    days = (now - dt).total_seconds() / 86_400
    if days < 1 / 24:
        return "now"
    if days < 1:
        return f"{days * 24:.0f}h"
    if days < 60:
        return f"{days:.0f}d"
    return f"{days / 30.4:.0f}mo"


def _titled(f) -> str:
    """A memory's text for a terminal row, after its title cut to a few words (a long title
    filled the row's three lines, and the text it titled was never shown)."""
    return (f"{one_line(f.title, TITLE_CHARS)}: " if f.title else "") + f.content


#: Of a title, in a terminal row: enough for a day's ("The session of Wednesday 30 September
#: 2026"), whose date cut short reads as another.
TITLE_CHARS = 42


# Control characters (an escape sequence a memory may carry from an assistant or an import
# would recolour or drive the reader's terminal), and the bidirectional overrides and isolates
# (they would make the rest of a row read backwards): shown as U+FFFD; tabs and newlines are spaces.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """`text` with no control character left for a terminal to act on."""
    return _CONTROL.sub("\ufffd", text) if not text.isprintable() else text


def one_line(text: str, width: int) -> str:
    flat = " ".join(printable(text[: 4 * width + 64]).split())  # (a memory may be megabytes: flatten only the head)
    if len(text) > 4 * width + 64 and len(flat) <= width:
        flat += " …"
    if len(flat) <= width:
        return flat
    cut = flat[: width - 1]
    space = cut.rfind(" ")  # (at a word's end, where one is near: "Saturday 05 Dece…" read as a typo)
    return (cut[:space] if space > 2 * width // 3 else cut).rstrip() + "…"


#: SearchScore's sum, in words (a heading's tip in the widgets).
SCORE_FORMULA = "SearchScore = {:.2f}×relevance + {:.2f}×recency + {:.2f}×revision".format(*SEARCH_WEIGHTS)
#: What the two numbers of a recall's text table mean (its last line); `{}`: the lifts some row has.
SCORE_LEGEND = ("score: how well a memory answers ({:.2f} match + {:.2f} recency + {:.2f} revisions{{}}); match: how "
                "much of the question it contains, in words and in meaning (strong from {:.2f}, weak under {:.2f})"
                ).format(*SEARCH_WEIGHTS, AGE_GATE_RELEVANCE, WEAK_RELEVANCE)


def score_legend(memories) -> str:
    """SCORE_LEGEND, naming the parts beyond the three that some of these memories have (a
    score then no longer adds up to the three alone)."""
    extra = ([" + a lift for each time this session showed it"] if any(m.score.working_set for m in memories) else []) \
        + ([" + what your feedback taught (either sign)"] if any(m.score.learned for m in memories) else [])
    return SCORE_LEGEND.format("".join(extra))

#: What each retrieval mode means, in a person's words (the API keeps the technical names).
MODE_WORDS = {
    "full_bm25_tfidf_meaning": "ranked by the words, word parts and meaning it shares with the question",
    "bm25_meaning_in_process": "ranked by the words and meaning it shares with the question",
    "full_bm25_tfidf": "ranked by the words and word parts it shares with the question",
    "bm25_in_process": "ranked by the words it shares with the question",
    "bm25_meaning_sql_fallback": "ranked from the file by shared words and meaning (the in-memory index was not "
                                 "available)",
    "bm25_sql_fallback": "ranked from the file by shared words (the in-memory index was not available)",
}


def mode_words(mode: str, *, technical: bool = False) -> str:
    words = MODE_WORDS.get(mode, mode)
    return f"{words} (retrieval_mode {mode})" if technical else words


def learning_words(learning) -> str:
    """The learning loop's phase, as a person would say it."""
    if learning.ranking == "off":
        return f"learning: off, the default ranking ({plural(learning.feedback_signals, 'signal')} kept)"
    if learning.phase == 1:
        return (f"learning: collecting feedback ({learning.feedback_signals} of {learning.signals_to_start} signals "
                "before it starts)")
    if learning.phase == 2:
        return f"learning: memories marked useful rise ({learning.feedback_signals} signals)"
    return f"learning: ranking learned from your feedback ({learning.feedback_signals} signals)"


def origin_html(prov) -> str:
    """Where a memory came from, for a row's "where from" panel."""
    e = html.escape
    if prov is None:
        return f"<div style='color:{FAINT};font-size:12px'>this memory is gone</div>"
    where = e(prov.notebook) if prov.notebook else "outside a notebook"
    if prov.cell is not None:
        where += f", cell [{prov.cell}]"
    if prov.cell_id:
        where += f" <span style='color:{FAINT}'>(cell id {e(prov.cell_id)})</span>"
    code = (f"<div style='color:{MUTED};margin-top:2px'>the cell run just before it:</div>"
            "<pre style='margin:2px 0;padding:4px 6px;background:var(--jp-layout-color2,#f6f8fa);border-radius:3px;"
            f"max-height:16em;overflow:auto;white-space:pre-wrap'>{e(prov.code)}</pre>" if prov.code else
            f"<div style='color:{FAINT}'>no code was kept with it</div>")
    return (f"<div style='font-size:12px;line-height:1.4;padding:2px 0 6px 36px;overflow-wrap:anywhere'>from {where}"
            f"{code}</div>")


def terminal_width() -> int:
    """The terminal's columns ($COLUMNS first, as IPython and the shell set it), kept sane."""
    return max(60, min(160, shutil.get_terminal_size((100, 24)).columns))


def wrap(text: str, width: int, indent: int = 0, *, lines: int | None = None) -> list[str]:
    """Word-boundary wrapping, continuation lines indented; at most `lines` lines. A text cut
    short ends in " …" after its last whole word (only the head of a long text is read: if it
    ends inside a word, that piece is dropped rather than shown as if it were the word, unless
    it is longer than a line: a URL or a blob is shown cut, not left out)."""
    pad = " " * indent
    limit = (lines or 40) * width
    head, cut = printable(text[:limit]), len(text) > limit
    words = head.split()
    if cut and words and not text[limit].isspace() and not head[-1].isspace() and len(words[-1]) < width - indent:
        words.pop()
    out = textwrap.wrap(" ".join(words), width=width, initial_indent=pad, subsequent_indent=pad,
                        break_on_hyphens=False) or [pad]
    if lines is not None and len(out) > lines:
        out, cut = out[:lines], True
    if cut:
        last = out[-1]
        while len(last) + 2 > width and " " in last.strip():
            last = last.rstrip().rsplit(" ", 1)[0]
        out[-1] = last[: width - 2].rstrip() + " …"  # (a single word longer than the line: cut, and marked)
    return out


#: How well a memory matched, in words (the views and the Memory panel alike).
STRENGTH_WORDS = {"strong": "strong match", "partial": "match", "weak": "weak match", "related": "related"}
# A score's parts in plain words on screen (the views and the Memory panel alike); the API's
# technical names in each part's tooltip.
PART_WORDS = {"relevance": "match", "bm25": "words", "tfidf": "word parts", "meaning": "meaning", "context": "context",
              "recency": "recent", "revision": "revised", "working_set": "this session", "learned": "learned"}
PART_TIPS = {"relevance": "relevance: words, word parts and meaning fused", "meaning": "meaning: how close the "
             "memory's meaning is to the question's (the cosine of their embeddings: 0 up to what unrelated "
             "texts reach, 1 from what a restatement reaches)",
             "bm25": "bm25: the question's words (BM25F over "
             "content, title, tags, project, type)", "tfidf": "tfidf: cosine of character 3-grams (word parts, "
             "variants, typos)", "context": "context: the session context channel", "recency": "recency: halves every "
             "30 days since the last update", "revision": "revision: min(revision_count, 10) / 10",
             "working_set": "working_set: shown earlier in this session", "learned": "learned: the learning loop"}


def _why_text(m) -> str:
    """Why a memory is in the list, in words: how well it matched and on what."""
    if m.strength == "related":
        return f"related: {m.reason} (it does not match the question itself)"
    if m.strength == "listed":
        return "pinned: in every session's context" if m.fact.is_core else "one of the newest (no question was given)"
    label = STRENGTH_WORDS[m.strength]
    reason = m.reason or ("the day asked about" if m.score.temporal else "")
    if m.similar and not m.matched:  # (no word in common)
        return f"{label} by similar meaning"
    return f"{label} on {reason}" if reason else label


def _meta_text(f, viewer: str | None = None) -> str:
    parts = [f.type]
    if f.tags:
        parts.append(", ".join(f.tags))
    parts.append(age_text(f.updated_at))
    if f.notebook or f.cell is not None:
        name = (f.notebook or "").rsplit("/", 1)[-1] or "cell"
        parts.append(f"{name} [{f.cell}]" if f.cell is not None else name)
    if f.shared:
        parts.append(author_text(f, viewer))
    return " · ".join(parts)


def author_text(f, viewer: str | None = None) -> str:
    """Who wrote a shared memory (every user on the memory finds it): "you" to its author, when
    the reader (`viewer`, a user id) is known."""
    if viewer is not None and f.user_id == viewer:
        return "shared by you"
    return f"shared by {f.user_id or 'the default user'}"


def forgotten_words(count: int) -> str:
    """What stands in a saved output for the memories forgotten from it (their text is gone)."""
    return f"{plural(count, 'memory', 'memories')} found here {'was' if count == 1 else 'were'} forgotten since"


def recall_text(res, width: int | None = None, viewer: str | None = None, forgotten: int = 0) -> str:
    """The memories as a table that fits the terminal: rank, score, match, a short id, then
    the memory wrapped at word boundaries with its type, tags, age and notebook below it.
    `viewer`: the user reading it (their own shared memories say "shared by you");
    `forgotten`: how many it showed were forgotten since (left out)."""
    width = width or terminal_width()
    lines = wrap(f"recall {res.query!r}: {plural(len(res.memories), 'memory', 'memories')}, "
                 f"{res.elapsed_ms:.1f} ms", width)
    if res.degraded_mode:
        lines += wrap(f"slower path: {mode_words(res.retrieval_mode)} ({res.degraded_reason})", width)
    if res.older_matches:
        lines += wrap(age_gate_words(res.age_gate_days, res.older_matches, res.older_shown), width)
    if forgotten:
        lines += wrap(forgotten_words(forgotten), width)
    if not res.memories:
        return "\n".join(lines if forgotten else lines + ["no memory matched"])
    wide = any(m.score.value < 0 for m in res.memories)  # (a learned part can take a score below 0)
    indent = 29 + wide  # under the memory column
    lines.append(f"{'#':>3}  {'score':>{5 + wide}}  {'match':>5}  {'id':8}  memory")
    pinned = False
    for i, m in enumerate(res.memories, 1):
        s, f = m.score, m.fact
        pinned |= f.is_core
        mark = "*" if f.is_core else " "
        body = wrap(_titled(f), width - indent, lines=3)
        lines.append(f"{i:>3}  {s.value:{5 + wide}.3f}  {s.relevance:5.2f}  {f.fact_id[:8]}{mark} {body[0]}")
        lines += [" " * indent + b for b in body[1:]]
        lines += wrap(_why_text(m), width, indent)
        lines += wrap(_meta_text(f, viewer), width, indent)
    lines += wrap(score_legend(res.memories), width)
    if pinned:
        lines.append("* pinned: in every session's context")
    return "\n".join(lines)


def marked_html(text: str, terms, style: str = "") -> str:
    """`text` with the words that matched the question (its term hashes) in <mark>: the index's
    own analyser decides, so "dropped" is marked for "drop" and nothing that did not count is."""
    from ..core.text import marked

    if not terms:
        return html.escape(text)
    mark = f"<mark class='slm-hit' style='{style}'>" if style else "<mark class='slm-hit'>"
    return "".join(f"{mark}{html.escape(p)}</mark>" if hit else html.escape(p) for p, hit in marked(text, terms))


#: A pinned memory's mark, in words (an emoji font may be missing where the page is read).
CORE_BADGE = ("<span class='slm-core' title='core memory: always in a session context' style='background:#fde68a;"
              "color:#000;border-radius:3px;padding:0 4px;margin-right:4px;font-size:11px'>core</span>")
PIN = "📌"  # the engine's mark of a pinned memory in a context block


def memories_html(memories, viewer: str | None = None) -> str:
    """Scored memories as an HTML table (where widgets do not render): matched words marked.
    Four columns, the memory's labels on a line under it (as in a terminal), so that the table
    fits a narrow output area instead of hiding its right half in a sideways scroll."""
    e = html.escape
    rows = []
    for i, m in enumerate(memories, 1):
        s, f, terms = m.score, m.fact, m.query_terms
        where = e((f.notebook or "").rsplit("/", 1)[-1]) + (f" [{f.cell}]" if f.cell is not None else "")
        text = ((CORE_BADGE if f.is_core else "")
                + (f"<b>{marked_html(one_line(f.title, 80), terms)}</b> · " if f.title else "")
                + marked_html(one_line(f.content, 1000), terms))
        labels = " · ".join(x for x in (e(f.type), e(", ".join(f.tags)), age_text(f.updated_at),
                                        f"<span title='{e(f.notebook or '')}'>{where}</span>" if where else "",
                                        e(author_text(f, viewer)) if f.shared else "",
                                        f"<code>{e(f.fact_id[:8])}</code>") if x)
        rows.append(
            f"<tr><td {_NUMBER}>{i}</td><td {_NUMBER} title='SearchScore'>{s.value:.3f} <span class=slm-sbar "
            f"style='{_BAR};width:{40 * min(1, s.value):.0f}px'></span></td><td {_NUMBER} title='relevance'>"
            f"{s.relevance:.2f}</td><td style='text-align:left;overflow-wrap:anywhere'>{text}"
            f"<div style='color:{MUTED}'>{e(_why_text(m))}</div><div style='color:{FAINT}'>{labels}</div></td></tr>")
    head = "<tr>" + "".join(f"<th {_LEFT}>{h}</th>" for h in ("#", "score", "match", "memory")) + "</tr>"
    return f"{_CSS}<div style='overflow-x:auto'><table class=slm-t>{head}{''.join(rows)}</table></div>"


def recall_html(res, viewer: str | None = None, forgotten: int = 0) -> str:
    """A recall as HTML: what was asked, how it ran, the memories' table (`forgotten`: as
    `recall_text`)."""
    e = html.escape
    cap = (f"recall <b>{e(res.query)}</b> · {plural(len(res.memories), 'memory', 'memories')} · "
           f"{res.elapsed_ms:.1f} ms")
    if res.degraded_mode:
        cap += f" · <span style='color:{ERROR}'>slower path: {e(res.degraded_reason or '')}</span>"
    if res.older_matches:
        cap += (f"<div style='color:{MUTED}'>"
                f"{e(age_gate_words(res.age_gate_days, res.older_matches, res.older_shown))}</div>")
    if forgotten:
        cap += f"<div style='color:{MUTED}'>{e(forgotten_words(forgotten))}</div>"
    if not res.memories:
        return f"<div>{cap}</div>" + ("" if forgotten else "<div><i>No memory matched.</i></div>")
    return f"<div>{cap}</div>{memories_html(res.memories, viewer)}"


def session_text(init, width: int | None = None) -> str:
    """A session as it opens, for a terminal: new or continued, what is known, the context."""
    width = width or terminal_width()
    state = "new session" if init.is_new else "continued session"
    lines = wrap(f"{state} {init.session_id} · {plural(init.memory_count, 'memory', 'memories')} · "
                 f"{learning_words(init.learning)}", width)
    if init.degraded_mode:
        lines += wrap(f"slower path: {mode_words(init.retrieval_mode)}", width)
    if init.nothing_stored:
        lines += wrap("no memories yet: what you keep with %%remember comes back here in your next sessions", width)
    elif init.abstained:
        lines += wrap(f"nothing here answers this session's question well: {init.abstention_reason}", width)
    gate = init.age_gate
    # (not when the abstention is the gate's own, which says it already)
    if gate and gate[1] and not init.nothing_stored and "(the age gate" not in (init.abstention_reason or ""):
        lines += wrap(age_gate_words(*gate), width)
    if init.recent_sessions:  # (as the HTML and the widget show them)
        lines.append("earlier sessions:")
        for r in init.recent_sessions:
            lines += wrap(f"{when_text(r.date)} {one_line(r.summary, 160)}", width, 2)
    # The context block as plain lines: no markdown heading, italics or "no memories" line (the
    # lines above say so), and words for the pin (fonts lack 📌)
    context = [raw[1:-1] if len(raw) > 1 and raw[0] == raw[-1] == "_" else raw
               for raw in init.context.replace(PIN + " ", "(pinned) ").splitlines()
               if not raw.startswith("# ") and not (not init.memory_count and raw.startswith("_No relevant memories"))]
    for raw in "\n".join(context).strip("\n").splitlines():
        bullet = raw.startswith("- ")
        lines += wrap(raw[2:] if bullet else raw, width - 2, 0) if not bullet else [
            ("- " if k == 0 else "  ") + x for k, x in enumerate(wrap(raw[2:], width - 2))]
    if any(m.is_core for m in init.memories):
        lines.append("(pinned): in every session's context")
    return "\n".join(lines)


def session_html(init, viewer: str | None = None) -> str:
    """A session as it opens, as HTML (where widgets do not render): new or continued, the
    banners, earlier sessions, the memories' table, and the context block (folded)."""
    e = html.escape
    state = "new session" if init.is_new else "continued session"
    out = (f"<div><b>{state}</b> <code>{e(init.session_id)}</code> · "
           f"{plural(init.memory_count, 'memory', 'memories')} · {e(learning_words(init.learning))}</div>")
    if init.degraded_mode:
        out += f"<div style='color:{ERROR}'>slower path: {e(mode_words(init.retrieval_mode))}</div>"
    if init.nothing_stored:
        out += "<div>no memories yet: what you keep with %%remember comes back here in your next sessions</div>"
    elif init.abstained:
        out += (f"<div style='color:var(--jp-warn-color1,#a60)'>nothing here answers this session's question well: "
                f"{e(init.abstention_reason or '')}</div>")
    if init.message:
        out += f"<div style='color:{INK}'>{e(init.message)}</div>"
    gate = init.age_gate
    if gate and gate[1] and not init.nothing_stored:
        out += f"<div style='color:{MUTED}'>{e(age_gate_words(*gate))}</div>"
    if init.recent_sessions:
        out += f"<div style='color:{INK}'><b>earlier sessions</b>" + "".join(
            f"<div>{when_text(s.date)} {e(one_line(s.summary, 160))}</div>" for s in init.recent_sessions) + "</div>"
    if init.scored_memories:
        out += memories_html(init.scored_memories, viewer)
    elif init.memories:
        out += "<ul>" + "".join(f"<li>{CORE_BADGE if m.is_core else ''}{e(one_line(m.content, 200))}</li>"
                                for m in init.memories) + "</ul>"
    context = e(init.context.rstrip()).replace(PIN + " ", CORE_BADGE)
    return (f"{out}<details><summary>context block</summary><pre style='white-space:pre-wrap'>{context}</pre>"
            "</details>")


def _page_what(page) -> str:
    return "memories" + (f" of project {page.project}" if page.project is not None else "") + (
        f" of type {page.type}" if page.type is not None else "")


def _page_head(page) -> str:
    """Which memories a page holds and where it sits: "memories 21-40 of 57, newest first"."""
    if not page.facts:
        if not page.total:
            return f"no {_page_what(page)}"
        pages = -(-page.total // page.limit)
        return (f"no {_page_what(page)} on this page: there {'is' if page.total == 1 else 'are'} {page.total:,}, "
                f"on {plural(pages, 'page')} of {page.limit}")
    head = f"{_page_what(page)} {page.offset + 1:,}-{page.offset + len(page.facts):,} of {page.total:,}, newest first"
    return head + (" (--page N for the next ones)" if page.has_more else "")


def page_text(page, width: int | None = None) -> str:
    """A page of memories for a terminal: a short id, the memory wrapped, its type, tags, age."""
    width = width or terminal_width()
    lines = wrap(_page_head(page), width)
    for f in page.facts:
        mark = "*" if f.is_core else " "
        body = wrap(_titled(f), width - 10, lines=3)
        lines.append(f"{f.fact_id[:8]}{mark} {body[0]}")
        lines += [" " * 10 + b for b in body[1:]]
        lines += wrap(_meta_text(f, page.viewer), width, 10)
    if any(f.is_core for f in page.facts):
        lines.append("* pinned: in every session's context")
    return "\n".join(lines)


def page_html(page) -> str:
    """A page of memories as an HTML table: id, memory, type, tags, age, where from."""
    e = html.escape
    rows = "".join(
        f"<tr><td {_LEFT}><code>{e(f.fact_id[:8])}</code></td><td style='text-align:left;min-width:16em'>"
        f"{CORE_BADGE if f.is_core else ''}{'<b>' + e(one_line(f.title, 80)) + '</b> · ' if f.title else ''}"
        f"{e(one_line(f.content, 1000))}</td><td {_LEFT}>{e(f.type)}</td><td {_LEFT}>{e(', '.join(f.tags))}</td>"
        f"<td {_LEFT}>{age_text(f.updated_at)}</td><td {_LEFT}>{e((f.notebook or '').rsplit('/', 1)[-1])}"
        f"{' [' + str(f.cell) + ']' if f.cell is not None else ''}"
        f"{'<br>' + e(author_text(f, page.viewer)) if f.shared else ''}</td></tr>" for f in page.facts)
    head = "<tr>" + "".join(f"<th {_LEFT}>{h}</th>" for h in ("id", "memory", "type", "tags", "age", "from")) + "</tr>"
    table = f"<div style='overflow-x:auto'><table class=slm-t>{head}{rows}</table></div>" if page.facts else ""
    return f"{_CSS}<div>{e(_page_head(page))}</div>{table}"
