"""Session ids: the ones people's sessions get, and the ones tools open (synthetic), which are
accepted but never enter a working set or give implicit feedback signals."""

from __future__ import annotations

import secrets
from datetime import datetime

from .clock import local

#: Sessions opened by tools, not people.
SYNTHETIC_SESSION_PREFIXES = ("http:", "mcp:", "cli:", "probe:")


def is_synthetic_session(session_id: str | None) -> bool:
    return bool(session_id) and session_id.startswith(SYNTHETIC_SESSION_PREFIXES)


def new_session_id(now: datetime) -> str:
    return f"slm-{local(now):%Y%m%d}-{secrets.token_hex(4)}"  # (the day the person is in)
