"""What differs between the SQL of the memory file (DuckDB) and of the team's server
(PostgreSQL), in one place: every statement is written once, with these pieces in it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dialect:
    name: str
    #: A timestamp column as seconds since the epoch.
    epoch: str
    #: The next change stamp (for a change of one row).
    next_stamp: str
    #: A stored vector's cosine with a question's: divided by its norm (a vector written by hand
    #: counts as its direction only), in double precision, so that a file and a server agree.
    dot: str
    #: A fixed order of memories to draw a sample in.
    sample_order: str
    #: Whether a reader that read the newest stamp n has every change up to n (PostgreSQL's
    #: clock); DuckDB's sequence may have handed out stamps not committed yet.
    stamps_in_commit_order: bool
    #: A row holding a vector of the model given as the statement's parameter.
    has_vector: str = "vec_model = ? AND vec IS NOT NULL"


DUCKDB = Dialect(
    name="duckdb",
    epoch="epoch(updated_at)",
    next_stamp="nextval('change_seq')",
    dot="list_dot_product(vec::DOUBLE[], ?::DOUBLE[]) / nullif(sqrt(list_dot_product(vec::DOUBLE[], vec::DOUBLE[])), 0)",
    sample_order="hash(doc_id)",
    stamps_in_commit_order=False,
)

POSTGRES = Dialect(
    name="postgresql",
    epoch="extract(epoch FROM updated_at)::float8",
    next_stamp="take_stamps(1)",
    dot="(SELECT sum(a::float8 * b) / nullif(sqrt(sum(a::float8 * a)), 0) FROM unnest(vec, ?::float8[]) AS t(a, b))",
    sample_order="hashint8(doc_id)",
    stamps_in_commit_order=True,
)
