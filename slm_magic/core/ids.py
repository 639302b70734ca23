"""Ids a memory gets when it is written: its fact id, and the hash of its content that finds a
copy of it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence


def new_fact_ids(n: int) -> list[str]:
    """n fresh memory ids: 16 hex digits, 64 random bits each, drawn at once."""
    digits = os.urandom(8 * n).hex()
    return [digits[i:i + 16] for i in range(0, 16 * n, 16)]


def content_hashes(contents: Sequence[str]) -> list[str]:
    return list(map(content_hash, contents))


def content_hash(content: str) -> str:
    """Hash of the content with case and whitespace normalised: equal findings, equal hash."""
    normal = " ".join(content.casefold().split())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:32]
