"""Plain renderings of results: an HTML table for notebooks, a text table for terminals.

Pure functions of the engine's models (no IPython here): the models' `_repr_html_` and
`__str__` call them, and the widgets issue replaces the HTML with live views.
"""

from __future__ import annotations

import html
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .models import RecallResult, SessionInit

_CSS = ("<style>.slm-t{border-collapse:collapse;font-size:12px}.slm-t td,.slm-t th{padding:3px 8px;"
        "border-bottom:1px solid #ddd;text-align:left;vertical-align:top}.slm-t td.n{text-align:right;"
        "font-variant-numeric:tabular-nums}.slm-bar{display:inline-block;height:8px;background:#4c78a8}</style>")


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


def recall_text(res: "RecallResult") -> str:
    head = f"recall {res.query!r}: {len(res.memories)} memories, {res.retrieval_mode}, {res.elapsed_ms:.1f} ms"
    if res.degraded_mode:
        head += f"  [degraded: {res.degraded_reason}]"
    rows = [head, f"{'#':>2}  {'score':>5}  {'rel':>4}  {'bm25':>4}  {'ctx':>4}  {'rec':>4}  {'id':16}  memory"]
    for i, m in enumerate(res.memories, 1):
        s = m.score
        pin = "*" if m.fact.is_core else " "
        rows.append(f"{i:>2}  {s.value:5.3f}  {s.relevance:4.2f}  {s.bm25:4.2f}  {s.tfidf:4.2f}  {s.recency:4.2f}  "
                    f"{m.fact_id:16}{pin} {one_line(m.content, 70)}")
    return "\n".join(rows)


def recall_html(res: "RecallResult") -> str:
    e = html.escape
    cap = f"recall <b>{e(res.query)}</b> · {len(res.memories)} memories · {e(res.retrieval_mode)} · {res.elapsed_ms:.1f} ms"
    if res.degraded_mode:
        cap += f" · <span style='color:#b00'>degraded: {e(res.degraded_reason or '')}</span>"
    rows = []
    for i, m in enumerate(res.memories, 1):
        s, f = m.score, m.fact
        where = e(f.notebook or "") + (f" [{f.cell}]" if f.cell is not None else "")
        rows.append(
            f"<tr><td class=n>{i}</td><td class=n>{s.value:.3f} <span class=slm-bar style='width:{60 * min(1, s.value):.0f}px'>"
            f"</span></td><td class=n>{s.relevance:.2f}</td><td class=n>{s.bm25:.2f}</td><td class=n>{s.tfidf:.2f}</td>"
            f"<td class=n>{s.recency:.2f}</td><td class=n>{s.revision:.2f}</td><td>{e(f.type)}{' 📌' if f.is_core else ''}"
            f"</td><td>{e(one_line(f.title or f.content, 120))}</td><td>{e(', '.join(f.tags))}</td>"
            f"<td>{age_text(f.updated_at)}</td><td>{where}</td><td><code>{e(f.fact_id)}</code></td></tr>")
    head = ("<tr><th>#</th><th>SearchScore</th><th>relevance</th><th>bm25</th><th>tfidf</th><th>recency</th>"
            "<th>revision</th><th>type</th><th>memory</th><th>tags</th><th>age</th><th>from</th><th>id</th></tr>")
    return f"{_CSS}<div>{cap}</div><table class=slm-t>{head}{''.join(rows)}</table>"


def session_text(init: "SessionInit") -> str:
    lines = [f"session {init.session_id}  ({init.memory_count} memories, {init.retrieval_mode}, "
             f"learning phase {init.learning.phase}: {init.learning.status})"]
    if init.degraded_mode:
        lines.append("degraded: the SQL fallback answered")
    if init.abstained:
        lines.append(f"abstained: {init.abstention_reason}")
    lines.append(init.context.rstrip())
    return "\n".join(lines)


def session_html(init: "SessionInit") -> str:
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
