"""Shared fixtures: a throwaway PostgreSQL cluster per test process, started on first use."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_support import PgCluster, PgUnavailable

from ledger.storage import LogStorage, MemoryStorage, SqliteStorage


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    try:
        cluster = PgCluster()
    except PgUnavailable as e:
        pytest.skip(str(e))
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: PgCluster) -> str:
    """The URL of a fresh, empty database on the throwaway cluster."""
    return pg_cluster.new_database()


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgresql", marks=pytest.mark.postgresql)])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogStorage]:
    """One log storage per backend: the storage contract tests run against each of them."""
    s: LogStorage
    if request.param == "memory":
        s = MemoryStorage()
    elif request.param == "sqlite":
        s = SqliteStorage(tmp_path)
    else:
        from ledger.storage._postgres import PostgresStorage

        s = PostgresStorage(request.getfixturevalue("pg_url"), pool_size=2)
    yield s
    s.close()
