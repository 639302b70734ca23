"""Errors the engine raises on purpose. Anything else escaping is a bug."""


class SlmMagicError(Exception):
    """Base of every documented error."""


class StoreError(SlmMagicError):
    """The memory file cannot be opened or used (wrong kind of file, newer schema, ...)."""


class InvalidInput(SlmMagicError, ValueError):
    """An argument the engine cannot accept; the message says which and why."""
