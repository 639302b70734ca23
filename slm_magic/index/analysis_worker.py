"""The second process of a bulk write (see `bulk.py`): it reads batches of columns, pickled,
on stdin and writes each batch's Postings, pickled, on stdout, until stdin closes. Run as
`python -m slm_magic.index.analysis_worker`; it imports only the analyser, never the caller's code."""

from __future__ import annotations

import os
import pickle
import sys

from slm_magic.index.analysis import Postings


def main() -> None:
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            columns = pickle.load(source)
        except EOFError:
            # Out at once: tearing down the word caches and arrays one object at a time took
            # a quarter of a second, which the caller waited for (stdout is flushed already).
            os._exit(0)
        pickle.dump(Postings.of_columns(columns).packed(), sink, protocol=pickle.HIGHEST_PROTOCOL)
        sink.flush()


if __name__ == "__main__":
    main()
