"""Plain renderings of results: an HTML table for notebooks, a text table for terminals.

Pure functions of the engine's models, which they read by attribute (a RecallResult, a
SessionInit, a LearningStatus, a Provenance) and never import, and no IPython: the models'
`_repr_html_` and `__str__` call them; in a kernel the widgets show live views instead.
"""

from __future__ import annotations

import html
import shutil
import textwrap
from datetime import datetime

_CSS = ("<style>.slm-t{border-collapse:collapse;font-size:12px}.slm-t td,.slm-t th{padding:3px 8px;"
        "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}.slm-t td.n{text-align:right;"
        "font-variant-numeric:tabular-nums}.slm-bar{display:inline-block;height:8px;background:#4c78a8}</style>")


def plural(n: int, one: str, many: str | None = None) -> str:
    """'1 memory', '3 memories'."""
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def age_text(dt: datetime, now: datetime | None = None) -> str:
    now = now or datetime.utcnow()
    days = (now - dt).total_seconds() / 86_400
    if days < 1 / 24:
        return "now"
    if days < 1:
        return f"{days * 24:.0f}h"
    if days < 60:
        return f"{days:.0f}d"
    return f"{days / 30.4:.0f}mo"


def one_line(text: str, width: int) -> str:
    flat = " ".join(text[: 4 * width + 64].split())  # (a memory may be megabytes: flatten only the head)
    if len(text) > 4 * width + 64 and len(flat) <= width:
        flat += " …"
    return flat if len(flat) <= width else flat[: width - 1] + "…"


#: What each retrieval mode means, in a person's words (the API keeps the technical names).
MODE_WORDS = {
    "full_bm25_tfidf": "ranked by the words and word parts it shares with the question",
    "bm25_in_process": "ranked by the words it shares with the question",
    "bm25_sql_fallback": "ranked from the file by shared words (the in-memory index was not available)",
}


def mode_words(mode: str, *, technical: bool = False) -> str:
    words = MODE_WORDS.get(mode, mode)
    return f"{words} (retrieval_mode {mode})" if technical else words


def learning_words(learning) -> str:
    """The learning loop's phase, as a person would say it."""
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
        return "<div style='color:#777;font-size:12px'>this memory is gone</div>"
    where = e(prov.notebook or "not written from a notebook")
    if prov.cell is not None:
        where += f", cell [{prov.cell}]"
    if prov.cell_id:
        where += f" <span style='color:#777'>(cell id {e(prov.cell_id)})</span>"
    code = (f"<div style='color:#555;margin-top:2px'>the cell run just before it:</div>"
            f"<pre style='margin:2px 0;padding:4px 6px;background:#f6f8fa;border-radius:3px;max-height:16em;"
            f"overflow:auto;white-space:pre-wrap'>{e(prov.code)}</pre>" if prov.code else
            "<div style='color:#777'>no code was kept with it</div>")
    return f"<div style='font-size:12px;padding:2px 0 6px 36px'>from {where}{code}</div>"


def terminal_width() -> int:
    """The terminal's columns ($COLUMNS first, as IPython and the shell set it), kept sane."""
    return max(60, min(160, shutil.get_terminal_size((100, 24)).columns))


def wrap(text: str, width: int, indent: int = 0, *, lines: int | None = None) -> list[str]:
    """Word-boundary wrapping, continuation lines indented; at most `lines` lines (then …)."""
    pad = " " * indent
    out = textwrap.wrap(" ".join(text[: (lines or 40) * width].split()), width=width, initial_indent=pad,
                        subsequent_indent=pad, break_on_hyphens=False) or [pad]
    if lines is not None and len(out) > lines:
        out = out[:lines]
        out[-1] = out[-1][: width - 1].rstrip() + "…"
    return out


def _why_text(m) -> str:
    """Why a memory is in the list, in words: how well it matched and on what."""
    if m.strength == "related":
        return f"related: {m.reason} (it does not match the question itself)"
    label = {"strong": "strong match", "partial": "match", "weak": "weak match"}[m.strength]
    return f"{label} on {m.reason}" if m.reason else label


def _meta_text(f) -> str:
    parts = [f.type]
    if f.tags:
        parts.append(", ".join(f.tags))
    parts.append(age_text(f.updated_at))
    if f.notebook or f.cell is not None:
        name = (f.notebook or "").rsplit("/", 1)[-1] or "cell"
        parts.append(f"{name} [{f.cell}]" if f.cell is not None else name)
    if f.shared:
        parts.append(author_text(f))
    return " · ".join(parts)


def author_text(f) -> str:
    """Who wrote a shared memory (every user on the memory finds it)."""
    return f"shared by {f.user_id or 'the default user'}"


def recall_text(res, width: int | None = None) -> str:
    """The memories as a table that fits the terminal: rank, score, match, a short id, then
    the memory wrapped at word boundaries with its type, tags, age and notebook below it."""
    width = width or terminal_width()
    lines = wrap(f"recall {res.query!r}: {plural(len(res.memories), 'memory', 'memories')}, "
                 f"{res.elapsed_ms:.1f} ms", width)
    if res.degraded_mode:
        lines += wrap(f"slower path: {mode_words(res.retrieval_mode)} ({res.degraded_reason})", width)
    if res.older_matches:
        lines += wrap(f"older than {res.age_gate_days} days: "
                      f"{plural(res.older_matches, 'matching memory', 'matching memories')} left out unless "
                      "they match the question strongly", width)
    if not res.memories:
        return "\n".join(lines + ["no memory matched"])
    indent = 29  # under the memory column
    lines.append(f"{'#':>3}  {'score':>5}  {'match':>5}  {'id':8}  memory")
    pinned = False
    for i, m in enumerate(res.memories, 1):
        s, f = m.score, m.fact
        pinned |= f.is_core
        mark = "*" if f.is_core else " "
        text = (f"{f.title}: " if f.title else "") + f.content
        body = wrap(text, width - indent, lines=3)
        lines.append(f"{i:>3}  {s.value:5.3f}  {s.relevance:5.2f}  {f.fact_id[:8]}{mark} {body[0]}")
        lines += [" " * indent + b for b in body[1:]]
        lines += wrap(_why_text(m), width, indent)
        lines += wrap(_meta_text(f), width, indent)
    lines += wrap("score: how well a memory answers (0.60 match + 0.25 recency + 0.15 revisions); match: how much "
                  "of the question it contains (strong from 0.70, weak under 0.35)", width)
    if pinned:
        lines.append("* pinned: in every session's context")
    return "\n".join(lines)


def marked_html(text: str, terms, style: str = "") -> str:
    """`text` with the words that matched the question (its term hashes) in <mark>: the index's
    own analyser decides, so "dropped" is marked for "drop" and nothing that did not count is."""
    from .text import marked

    if not terms:
        return html.escape(text)
    mark = f"<mark class='slm-hit' style='{style}'>" if style else "<mark class='slm-hit'>"
    return "".join(f"{mark}{html.escape(p)}</mark>" if hit else html.escape(p) for p, hit in marked(text, terms))


def recall_html(res) -> str:
    """The memories as an HTML table (where widgets do not render): matched words marked."""
    e = html.escape
    cap = (f"recall <b>{e(res.query)}</b> · {plural(len(res.memories), 'memory', 'memories')} · "
           f"{res.elapsed_ms:.1f} ms")
    if res.degraded_mode:
        cap += f" · <span style='color:#b00'>slower path: {e(res.degraded_reason or '')}</span>"
    rows = []
    for i, m in enumerate(res.memories, 1):
        s, f, terms = m.score, m.fact, m.query_terms
        where = e(f.notebook or "") + (f" [{f.cell}]" if f.cell is not None else "")
        text = ((f"<b>{marked_html(one_line(f.title, 80), terms)}</b> · " if f.title else "")
                + marked_html(one_line(f.content, 160), terms))
        rows.append(
            f"<tr><td class=n>{i}</td><td class=n title='SearchScore'>{s.value:.3f} <span class=slm-bar "
            f"style='width:{60 * min(1, s.value):.0f}px'></span></td><td class=n title='relevance'>{s.relevance:.2f}"
            f"</td><td>{text}<div style='color:#666'>{e(_why_text(m))}</div></td><td>{e(f.type)}"
            f"{' 📌' if f.is_core else ''}</td><td>{e(', '.join(f.tags))}</td><td>{age_text(f.updated_at)}</td>"
            f"<td>{where}{'<br>' + e(author_text(f)) if f.shared else ''}</td>"
            f"<td><code>{e(f.fact_id[:8])}</code></td></tr>")
    head = ("<tr><th>#</th><th>score</th><th>match</th><th>memory</th><th>type</th><th>tags</th><th>age</th>"
            "<th>from</th><th>id</th></tr>")
    return f"{_CSS}<div>{cap}</div><table class=slm-t>{head}{''.join(rows)}</table>"


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
    if gate and gate[1] and not init.nothing_stored:
        lines += wrap(f"older than {gate[0]} days: {plural(gate[1], 'matching memory', 'matching memories')} "
                      "left out unless they match the question strongly", width)
    for raw in init.context.rstrip().splitlines():
        bullet = raw.startswith("- ")
        lines += wrap(raw[2:] if bullet else raw, width - 2, 0) if not bullet else [
            ("- " if k == 0 else "  ") + x for k, x in enumerate(wrap(raw[2:], width - 2))]
    if any(m.is_core for m in init.memories):
        lines.append("📌 pinned: in every session's context")
    return "\n".join(lines)


def session_html(init) -> str:
    e = html.escape
    banners = ""
    if init.degraded_mode:
        banners += "<div style='color:#b00'>degraded mode: BM25 from the SQL fallback answered</div>"
    if init.abstained:
        banners += f"<div style='color:#a60'>abstained: {e(init.abstention_reason or '')}</div>"
    items = "".join(f"<li>{'📌 ' if m.is_core else ''}{e(one_line(m.content, 200))}</li>" for m in init.memories)
    return (f"<div><b>session</b> <code>{e(init.session_id)}</code> · {init.memory_count} memories · "
            f"{e(init.retrieval_mode)} · learning phase {init.learning.phase} ({e(init.learning.status)})</div>"
            f"{banners}<div><b>Relevant Memory Context</b><ul>{items or '<li><i>No relevant memories yet.</i></li>'}"
            f"</ul></div>")
