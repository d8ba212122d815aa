"""Shared fixtures: a throwaway PostgreSQL cluster per test process, started on first use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pg_support import PgCluster, PgUnavailable


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
