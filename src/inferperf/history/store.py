"""The history database (SQLAlchemy 2.x Core): a SQLite file by default, PostgreSQL by URL.

Tables (all prefixed ``history_``, so a PostgreSQL database shared with tune's Optuna study is fine):

* ``history_schema``: one row, the schema version (:data:`SCHEMA_VERSION`); an older inferperf refuses a newer
  one with one line;
* ``history_results``: one row per Result document, keyed by its content hash
  (:func:`inferperf.results.content_hash`): the raw record, its JSON compressed with zlib;
* ``history_series``: one row per series (metric x workload x machine, :mod:`inferperf.history.series`);
* ``history_points``: one row per (series, Result): time (UTC), commit, branch, per-run values (JSON), median,
  95 % interval, runtime version, environment label, verdict;
* ``history_acks``: an accepted (intended) change at a point, with why.
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

from ..errors import BackendUnavailable, UsageError

SCHEMA_VERSION = 1
ENV_VAR = "INFERPERF_HISTORY_DB"
DEFAULT_FILE = "inferperf-history.db"

metadata = sa.MetaData()
schema_table = sa.Table("history_schema", metadata, sa.Column("version", sa.Integer, nullable=False))
results = sa.Table(
    "history_results", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("content_hash", sa.String(64), nullable=False, unique=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("created_at", sa.String(40), nullable=False),
    sa.Column("source", sa.Text, nullable=False),  # the file it was read from (as given to `history add`)
    sa.Column("document", sa.LargeBinary, nullable=False),  # zlib(JSON)
)  # fmt: skip
series = sa.Table(
    "history_series", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("key", sa.String(32), nullable=False, unique=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("metric", sa.String(32), nullable=False),
    sa.Column("direction", sa.String(8), nullable=False),
    sa.Column("machine", sa.String(16), nullable=False),
    sa.Column("workload", sa.JSON, nullable=False),
)  # fmt: skip
points = sa.Table(
    "history_points", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("series_id", sa.Integer, sa.ForeignKey("history_series.id", ondelete="CASCADE"), nullable=False,
              index=True),
    sa.Column("result_id", sa.Integer, sa.ForeignKey("history_results.id", ondelete="CASCADE"), nullable=False),
    sa.Column("time", sa.DateTime, nullable=False),  # UTC, naive
    sa.Column("commit", sa.String(64)),
    sa.Column("branch", sa.Text),
    sa.Column("values", sa.JSON, nullable=False),
    sa.Column("median", sa.Float, nullable=False),
    sa.Column("lo", sa.Float),
    sa.Column("hi", sa.Float),
    sa.Column("runtime", sa.Text, nullable=False),
    sa.Column("env", sa.Text, nullable=False),
    sa.Column("verdict", sa.String(12), nullable=False),
    sa.UniqueConstraint("series_id", "result_id"),
)  # fmt: skip
acks = sa.Table(
    "history_acks", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("point_id", sa.Integer, sa.ForeignKey("history_points.id", ondelete="CASCADE"), nullable=False,
              unique=True),
    sa.Column("why", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime, nullable=False),
)  # fmt: skip


def resolve_url(db: str | None) -> str:
    """The SQLAlchemy URL for ``--db`` (a path, or a URL with ``://``), else ``$INFERPERF_HISTORY_DB``, else
    ``./inferperf-history.db``. A path becomes ``sqlite:///ABSOLUTE-PATH``."""
    db = db or os.environ.get(ENV_VAR) or DEFAULT_FILE
    if "://" in db:
        return db
    return f"sqlite:///{Path(db).expanduser().resolve()}"


def redact(url: str) -> str:
    """``url`` with its password hidden (for error lines)."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - a malformed URL: show it as given (it has no parseable password)
        return url


def _engine(url: str) -> sa.Engine:
    if url.startswith("sqlite:"):
        path = url.removeprefix("sqlite:///")
        if path and path != url and not Path(path).parent.is_dir():
            raise UsageError(f"history database {path!r}: folder {str(Path(path).parent)!r} does not exist: create it"
                             " or pass another --db")
        engine = sa.create_engine(url)

        @sa.event.listens_for(engine, "connect")
        def _fk(conn, _record):  # SQLite enforces foreign keys (ON DELETE CASCADE) only when asked
            conn.execute("PRAGMA foreign_keys=ON")

        return engine
    if url.startswith("postgresql"):
        try:
            import psycopg  # noqa: F401
        except ImportError:
            raise BackendUnavailable("a postgresql history database needs the psycopg driver: "
                                     "pip install 'inferperf[distributed]'") from None
        return sa.create_engine(url, pool_pre_ping=True)
    raise UsageError(f"--db {redact(url)!r}: use a file path, sqlite:///PATH or postgresql+psycopg://USER@HOST/DB")


def open_store(db: str | None = None) -> sa.Engine:
    """Open (and create when new) the history database; check its schema version.

    Args:
        db: a file path or a SQLAlchemy URL (``sqlite:///...``, ``postgresql+psycopg://...``); None: see
            :func:`resolve_url`.

    Raises:
        UsageError: an unknown scheme, a database that cannot be reached, a schema newer than this inferperf's.
        BackendUnavailable: PostgreSQL without psycopg (names the extra).
    """
    url = resolve_url(db)
    engine = _engine(url)
    try:
        with engine.begin() as conn:
            version = None
            if sa.inspect(conn).has_table(schema_table.name):  # read before creating anything: a newer schema
                version = conn.execute(sa.select(sa.func.max(schema_table.c.version))).scalar()
            if version is None or version <= SCHEMA_VERSION:
                metadata.create_all(conn)
            if version is None:
                conn.execute(schema_table.insert().values(version=SCHEMA_VERSION))
                version = SCHEMA_VERSION
    except sa.exc.SQLAlchemyError as e:
        first = " ".join(str(e.orig if getattr(e, "orig", None) else e).split())[:200]
        raise UsageError(f"history database {redact(url)}: cannot open it ({first}): check the URL and that the "
                         "server is running") from None
    if version > SCHEMA_VERSION:
        engine.dispose()
        raise UsageError(f"history database {redact(url)} has schema v{version}, newer than this inferperf's "
                         f"v{SCHEMA_VERSION}: upgrade inferperf to read it")
    return engine


__all__ = ["SCHEMA_VERSION", "acks", "metadata", "open_store", "points", "redact", "resolve_url", "results",
           "schema_table", "series"]
