"""Issue 28 item 1: the history store on a real PostgreSQL server (.ci/run starts one with
scripts/start_postgres.sh and exports INFERPERF_TEST_POSTGRES_URL): idempotent, transactional, schema check."""

from __future__ import annotations

import os
import uuid

import pytest
import sqlalchemy as sa

from tests.history_results import make

PG_URL = os.environ.get("INFERPERF_TEST_POSTGRES_URL",
                        "postgresql+psycopg://inferperf:inferperf@127.0.0.1:5432/inferperf_tune")


@pytest.fixture
def pg_schema():
    """A fresh PostgreSQL schema (dropped afterwards): the store's URL with its search_path set to it."""
    pytest.importorskip("psycopg", reason="pip install 'inferperf[distributed]' (the test extra has it)")
    name = f"h_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(PG_URL)
    try:
        with admin.begin() as c:
            c.execute(sa.text(f"CREATE SCHEMA {name}"))
    except sa.exc.OperationalError as e:
        pytest.skip(f"no PostgreSQL at {PG_URL} (run scripts/start_postgres.sh): {str(e).splitlines()[0]}")
    sep = "&" if "?" in PG_URL else "?"
    yield f"{PG_URL}{sep}options=-csearch_path%3D{name}"
    with admin.begin() as c:
        c.execute(sa.text(f"DROP SCHEMA {name} CASCADE"))
    admin.dispose()


def test_postgresql_store_is_idempotent_transactional_and_versioned(pg_schema: str, monkeypatch) -> None:
    from inferperf.errors import UsageError
    from inferperf.history import ingest, store
    from inferperf.history.ingest import add

    e = store.open_store(pg_schema)
    assert add(e, [("a", make(seed=1))]).points == 3
    assert add(e, [("a", make(seed=1)), ("b", make(seed=2))]).duplicates == 1

    def boom(result):
        raise RuntimeError("fail")

    monkeypatch.setattr(ingest, "drafts", boom)
    with pytest.raises(RuntimeError):
        add(e, [("c", make(seed=3))])
    with e.connect() as c:
        assert c.execute(sa.select(sa.func.count()).select_from(store.results)).scalar() == 2
        assert c.execute(sa.select(sa.func.count()).select_from(store.points)).scalar() == 6
    with e.begin() as c:
        c.execute(store.schema_table.update().values(version=store.SCHEMA_VERSION + 1))
    e.dispose()
    with pytest.raises(UsageError, match="newer than this inferperf's"):
        store.open_store(pg_schema)
