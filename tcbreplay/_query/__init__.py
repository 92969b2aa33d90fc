"""Querying the store: user SQL on the locked-down views and its limits, named queries, the
catalog. Reads the store alone; it needs no scoring code (the ``scores`` views read what
scoring wrote)."""
