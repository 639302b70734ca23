"""The question a session opens with when none is asked: the words of its project's path that
say what it is for (not "home", a person's name, "notebooks" or "Untitled3")."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import PurePath


# Folder and file names that say nothing about what a session is for (a notebook's own name is
# "Untitled3.ipynb" until it is given one); digits and single letters say nothing either.
_GENERIC_DIRS = frozenset("home users user root projects project src code work repos repo git dev "
                          "documents desktop notebooks notebook tmp temp var opt mnt untitled copy ipynb py "
                          "jupyter lab content downloads private folders workspace workspaces".split())


_HOMES = frozenset(("home", "users"))  # the folder after one of these is a person's name


def query_from_path(project_path: str, ignore: Iterable[str] = ()) -> str:
    """The words of a project folder or a notebook's path: its name first, then the meaningful
    folders above it. Only words about something: generic names ("Untitled", "work",
    "notebooks", "tmp", …), digits, single letters, the folder after home/ or Users/ and the
    names in `ignore` (the user's) are left out, so a path may have no words at all."""
    if not project_path:
        return ""
    parts = [p for p in PurePath(project_path.replace("\\", "/")).parts if p not in ("/", "~", ".", "..")]
    skip = {n.lower() for n in ignore if n} | {parts[i + 1].lower() for i, p in enumerate(parts[:-1])
                                                if p.lower() in _HOMES}
    words: list[str] = []
    for part in reversed(parts):
        if part.lower() in skip:
            continue
        for w in re.split(r"[\W_]+", part):
            bare = w.lower().rstrip("0123456789")  # ("Untitled3" is "Untitled")
            if len(w) < 2 or w.isdigit() or bare in _GENERIC_DIRS or w.lower() in skip:
                continue
            if w.lower() not in (x.lower() for x in words):
                words.append(w)
    return " ".join(words)
