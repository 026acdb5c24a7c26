"""Result history in a database (SQLAlchemy Core: a SQLite file by default, PostgreSQL by URL).

:mod:`.store` the tables and the schema check, :mod:`.series` Result -> points and series keys,
:mod:`.ingest` the idempotent, transactional add. The change-point algorithm is a pure function in
:mod:`inferperf.analysis.changepoints`.
"""

from .ingest import AddReport, Provenance, add, git_provenance, read_results
from .store import SCHEMA_VERSION, open_store, resolve_url

__all__ = ["SCHEMA_VERSION", "AddReport", "Provenance", "add", "git_provenance", "open_store", "read_results",
           "resolve_url"]
