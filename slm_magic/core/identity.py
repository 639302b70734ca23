"""Whose memory this is when nobody says: one person, one name, on every face.

The magics, the command line, the MCP server and both APIs default to the same user, so what a
notebook remembers the assistant finds with the set-up the README shows. `$SLM_MAGIC_USER`
overrides the login name everywhere; an explicit user (`SLMMagic.user`, `--user`,
`Memory(user_id=...)`) overrides both.
"""

from __future__ import annotations

import getpass
import os


def default_user() -> str:
    """`$SLM_MAGIC_USER`, else the login name (never empty: an unknown login is "me")."""
    name = os.environ.get("SLM_MAGIC_USER", "").strip()
    if name:
        return name
    try:
        return getpass.getuser() or "me"
    except (KeyError, OSError):  # no passwd entry (some containers) and no $USER
        return "me"
