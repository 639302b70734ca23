"""Score bars as HTML: a stacked SearchScore bar per memory, and its parts side by side.

Pure functions of `SearchScore`, so the widths a view shows can be checked against the
engine's numbers without a browser. Every bar is drawn on SearchScore's own 0-1 axis and
labelled as SearchScore (API B's ContextScore is another formula on another scale).
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from slm_magic.results.display import FAINT, MUTED, PART_TIPS, PART_WORDS
from slm_magic.results.models import SEARCH_WEIGHTS, SearchScore

# One colour per part, the same in the stacked bar and in the breakdown.
COLOURS = {"relevance": "#4c78a8", "bm25": "#4c78a8", "tfidf": "#9ecae9", "recency": "#72b7b2",
           "revision": "#f58518", "working_set": "#b279a2", "learned": "#54a24b"}
COLOURS["context"] = "#c6dbef"
COLOURS["meaning"] = "#e45756"
BAR_PX = 96  # the full 0-1 axis of a stacked bar


@dataclass(frozen=True)
class Segment:
    part: str
    amount: float     # what the part adds to the score
    width_pct: float  # its share of the bar's full 0-1 axis


def segments(score: SearchScore) -> list[Segment]:
    """The stacked bar: each part's contribution, in order; they add up to `score.value`. A
    negative learned part (the learning loop lowering a memory) draws no piece of its own: it
    shortens the others, so the bar still ends at the score."""
    parts = score.contributions()
    positive = sum(max(0.0, a) for a in parts.values())
    shrink = 1.0 if positive <= score.value else max(0.0, score.value) / positive
    return [Segment(part, amount, round(100.0 * min(max(0.0, amount) * shrink, 1.0), 1))
            for part, amount in parts.items()]


def _tip(score: SearchScore) -> str:
    w_rel, w_rec, w_rev = SEARCH_WEIGHTS
    tip = (f"SearchScore {score.value:.3f} = {w_rel:.2f}×relevance {score.relevance:.3f} + "
           f"{w_rec:.2f}×recency {score.recency:.3f} + {w_rev:.2f}×revision {score.revision:.3f}")
    if score.working_set:
        tip += f" + working set {score.working_set:.3f}"
    if score.learned:
        tip += f" {'+' if score.learned > 0 else '−'} learned {abs(score.learned):.3f}"
    return tip


def stacked_bar(score: SearchScore) -> str:
    """The score's number and a bar whose coloured pieces are its parts (hover for the sum)."""
    pieces = "".join(
        f"<span class='slm-seg slm-{s.part}' style='display:inline-block;height:10px;width:{s.width_pct}%;"
        f"background:{COLOURS[s.part]}'></span>" for s in segments(score) if s.width_pct > 0)
    return (f"<div title='{html.escape(_tip(score))}' style='display:flex;align-items:center;gap:6px'>"
            f"<span class='slm-value' style='font-variant-numeric:tabular-nums;width:38px;text-align:right'>"
            f"{score.value:.3f}</span><span class='slm-bar' style='display:inline-flex;width:{BAR_PX}px;"
            f"height:10px;background:var(--jp-layout-color2,#eee);border-radius:2px;overflow:hidden'>{pieces}</span></div>")


def _part_bar(name: str, value: float, note: str = "") -> str:
    width = round(100.0 * min(abs(value), 1.0), 1)
    return (f"<span style='display:inline-flex;align-items:center;gap:4px;margin-right:14px' "
            f"title='{html.escape(PART_TIPS.get(name, name))}'>"
            f"<span style='color:{MUTED}'>{PART_WORDS.get(name, name)}</span>"
            f"<span style='display:inline-block;width:60px;height:8px;background:var(--jp-layout-color2,#eee);border-radius:2px'>"
            f"<span class='slm-part slm-{name}' style='display:block;height:8px;width:{width}%;"
            f"background:{COLOURS.get(name, '#888') if value >= 0 else '#d62728'}'></span></span>"
            f"<span style='font-variant-numeric:tabular-nums'>{value:.3f}</span>{note}</span>")


def breakdown(score: SearchScore) -> str:
    """The parts side by side, each on its own 0-1 axis, and the sum they make."""
    w_rel, w_rec, w_rev = SEARCH_WEIGHTS
    parts = (_part_bar("bm25", score.bm25) + _part_bar("tfidf", score.tfidf) + _part_bar("meaning", score.meaning)
             + (_part_bar("context", score.context) if score.context else "")
             + _part_bar("relevance", score.relevance, f"<span style='color:{FAINT}'> ×{w_rel:.2f}</span>")
             + _part_bar("recency", score.recency, f"<span style='color:{FAINT}'> ×{w_rec:.2f}</span>")
             + _part_bar("revision", score.revision, f"<span style='color:{FAINT}'> ×{w_rev:.2f}</span>"))
    if score.working_set:
        parts += _part_bar("working_set", score.working_set, f"<span style='color:{FAINT}'> added</span>")
    if score.learned:
        parts += _part_bar("learned", score.learned, f"<span style='color:{FAINT}'> added (learning loop)</span>")
    return (f"<div class='slm-breakdown' style='font-size:11px;line-height:1.8;padding:2px 0 6px 34px;display:flex;"
            f"flex-wrap:wrap'>{parts}<span style='color:{MUTED}' title='SearchScore'>= score {score.value:.3f}</span></div>")

