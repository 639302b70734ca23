"""A question mark ends a question, not a help request: `%recall why is churn low?`.

IPython reads a line ending in `?` as `object?` (help on the last word), so the question was
lost and "Object `low` not found." printed. This line transform runs before IPython's own and
turns a `%recall` or `%slm_start` line that has words before its `?` into the magic's call
with the `?` kept; `%recall?` and `%recall??` alone still show the help.
"""

from __future__ import annotations

import re

#: The magics whose argument is a question in a person's words.
ASKING = ("recall", "slm_start")

_LINE = re.compile(r"^(?P<indent>[ \t]*)(?:(?P<target>[A-Za-z_][\w.]*)[ \t]*=[ \t]*)?%(?P<magic>"
                   + "|".join(ASKING) + r")[ \t]+(?P<rest>\S.*?\?)[ \t]*(?P<end>\r?\n?)$")


def keep_question_marks(lines: list[str]) -> list[str]:
    """IPython's `line_transforms` hook: each asking-magic line ending in `?` becomes its call."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is None or m["rest"].lstrip("?") == "":
            out.append(line)
            continue
        call = f"get_ipython().run_line_magic({m['magic']!r}, {m['rest']!r})"
        target = f"{m['target']} = " if m["target"] else ""
        out.append(f"{m['indent']}{target}{call}{m['end'] or ''}")
    return out


def install(shell) -> None:
    transforms = shell.input_transformer_manager.line_transforms
    if keep_question_marks not in transforms:
        transforms.insert(0, keep_question_marks)


def uninstall(shell) -> None:
    transforms = shell.input_transformer_manager.line_transforms
    while keep_question_marks in transforms:
        transforms.remove(keep_question_marks)
