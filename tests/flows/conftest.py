"""One Prefect test harness per session (its server takes ~20 s to start on 2 cores)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="module")
def profiled_catalog(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """A catalog with analytic profiles and templates for two small models on three GPU types."""
    from catalog_db.setup import init_catalog
    from catalog_db.templates_io import rebuild_templates
    from profiling.runner import run_profiling

    db = tmp_path_factory.mktemp("flows") / "coral.duckdb"
    init_catalog(db)
    run_profiling(db, FLOW_MODELS, FLOW_GPUS, "analytic", n_workers=1, processes=False)
    rebuild_templates(db, models=FLOW_MODELS)
    return db


FLOW_MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-8B"]
FLOW_GPUS = ["H100-SXM", "L4", "A10G"]
