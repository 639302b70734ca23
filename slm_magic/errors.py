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


class InvalidImport(InvalidInput):
    """A file to import has a row that cannot be imported: the message names its line, and
    each face names its own way to import the valid rows (`--skip-invalid`, `on_invalid='skip'`)."""

    def __init__(self, message: str, option: str = "on_invalid='skip'"):
        self.message = message
        super().__init__(self.naming(option))

    def naming(self, option: str) -> str:
        return f"{self.message} ({option} imports the valid rows)"
