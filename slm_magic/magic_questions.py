"""A question mark ends a question, not a help request: `%recall why is churn low?`.

IPython reads a line ending in `?` as `object?` (help on the last word), so the question was
lost and "Object `low` not found." printed. A token transform of ours, which IPython tries
before its own help one, turns a `%recall` or `%slm_start` line with words before its `?` into
the magic's call with the `?` kept. Tokens, not text, so a `%recall …?` quoted in a string or
in a `%%remember` cell's body is left as written; `%recall?` and `%recall??` alone still show
the help.
"""

from __future__ import annotations

import tokenize

from IPython.core.inputtransformer2 import TokenTransformBase

#: The magics whose argument is a question in a person's words.
ASKING = ("recall", "slm_start")


class QuestionEnd(TokenTransformBase):
    """`[name =] %recall words?` -> `[name =] get_ipython().run_line_magic('recall', 'words?')`."""

    priority = 4  # (IPython's help transform is 5: at the same place, this one goes first)

    @classmethod
    def find(cls, tokens_by_line):
        for line in tokens_by_line:
            toks = [t for t in line if t.type not in (tokenize.INDENT, tokenize.DEDENT)]
            if len(toks) < 4 or toks[-2].string != "?":
                continue
            at = 2 if len(toks) > 5 and toks[0].type == tokenize.NAME and toks[1].string == "=" else 0
            magic, name = toks[at], toks[at + 1]
            if (magic.string == "%" and name.string in ASKING and name.start == magic.end
                    and toks[at + 2].string != "?" and toks[at + 2].start[0] == magic.start[0]):
                return cls(toks[0].start, magic, name)
        return None

    def __init__(self, start, magic, name):
        super().__init__(start)
        self.magic_col = magic.start[1]
        self.name = name.string
        self.args_col = name.end[1]

    def transform(self, lines: list[str]) -> list[str]:
        line = lines[self.start_line]
        body, end = line.rstrip("\r\n"), line[len(line.rstrip("\r\n")):]
        call = f"get_ipython().run_line_magic({self.name!r}, {body[self.args_col:].strip()!r})"
        return [*lines[:self.start_line], body[:self.magic_col] + call + (end or "\n"), *lines[self.start_line + 1:]]


def install(shell) -> None:
    transformers = shell.input_transformer_manager.token_transformers
    if QuestionEnd not in transformers:
        transformers.insert(0, QuestionEnd)


def uninstall(shell) -> None:
    transformers = shell.input_transformer_manager.token_transformers
    while QuestionEnd in transformers:
        transformers.remove(QuestionEnd)
