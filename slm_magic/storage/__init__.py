"""Where memories are kept, and the only code that runs SQL: the DuckDB file (its schema, its
migrations, every statement), the team's PostgreSQL server in the same shape, and the choice
between them (`backends.open_store`)."""
