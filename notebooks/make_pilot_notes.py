"""Writes pilot_notes.jsonl: a colleague's memories from a spring 2026 pilot, as `%slm_export`
writes them, for data_science_session.ipynb to import (their dates make the age gate visible).

    python notebooks/make_pilot_notes.py
"""

from datetime import datetime
from pathlib import Path

from slm_magic import Memory

NOTES = [
    (datetime(2026, 3, 9, 10, 5), "decision", "pilot,features",
     "Pilot: mean area alone as the size feature; it ranked first in the forest's importances."),
    (datetime(2026, 3, 10, 16, 40), "preference", "pilot,metric",
     "Pilot: the clinic asked for precision first (few false alarms) while the screening was voluntary."),
    (datetime(2026, 3, 12, 9, 15), "pattern", "pilot,training",
     "Pilot: logistic regression without scaling did not converge at max_iter=100: always scale first."),
    (datetime(2026, 3, 20, 14, 0), "discovery", "pilot,data",
     "Pilot extract: 13 rows had no concavity measurement and were dropped before training."),
]


def main() -> None:
    out = Path(__file__).parent / "data" / "pilot_notes.jsonl"
    clock = {"now": NOTES[0][0]}
    with Memory(":memory:", clock=lambda: clock["now"]) as mem:
        for when, kind, tags, text in NOTES:
            clock["now"] = when
            mem.remember(text, type=kind, tags=tags, project="tumour-screening", notebook="pilot/explore.ipynb")
        mem.export(out)
    print(f"wrote {len(NOTES)} memories to {out}")


if __name__ == "__main__":
    main()
