"""Where memories are kept, and the only code that runs SQL: the DuckDB file (its schema's
history in `migrations.py`, the column lists in `columns.py`, every statement in `store.py`,
the sessions' and signals' in their repositories), the team's PostgreSQL server in the same
shape (`pg_store.py`, `pg_schema.py`), and the choice between them (`backends.open_store`)."""
