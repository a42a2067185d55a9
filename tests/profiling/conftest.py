"""Catalog reference values for profiling tests (read from a real seeded catalog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from catalog_db import queries
from catalog_db.connection import read_connection
from planning.domain import GpuType, ModelArch


@pytest.fixture(scope="session")
def models(seeded_template_db: Path) -> dict[str, ModelArch]:
    with read_connection(seeded_template_db) as con:
        return {m.model: m for m in queries.models(con)}


@pytest.fixture(scope="session")
def gpus(seeded_template_db: Path) -> dict[str, GpuType]:
    with read_connection(seeded_template_db) as con:
        return {g.gpu_type: g for g in queries.gpu_types(con)}
