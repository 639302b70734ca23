"""Errors the engine raises on purpose. Anything else escaping is a bug."""


class SlmMagicError(Exception):
    """Base of every documented error."""


class StoreError(SlmMagicError):
    """The memory file cannot be opened or used (wrong kind of file, newer schema, ...)."""


class InvalidInput(SlmMagicError, ValueError):
    """An argument the engine cannot accept; the message says which and why."""


def type_name(value: object) -> str:
    """The name of a value's type, for a message (usable where a `type` parameter, as the
    seed's APIs name one, hides the builtin)."""
    return type(value).__name__
