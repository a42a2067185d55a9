"""Shared fixtures: a fresh catalog file per test (real DuckDB), GPU detection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from catalog_db.setup import init_catalog


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _has_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (nvidia-smi not found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def seeded_template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A catalog with schema and reference data, built once; copy it before writing."""
    path = tmp_path_factory.mktemp("catalog") / "seed.duckdb"
    init_catalog(path)
    return path


@pytest.fixture
def catalog_path(seeded_template_db: Path, tmp_path: Path) -> Path:
    """A seeded catalog file of this test's own."""
    path = tmp_path / "coral.duckdb"
    shutil.copy(seeded_template_db, path)
    return path
