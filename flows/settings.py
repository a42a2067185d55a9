"""Coral's one settings object, built once at an entry point (CLI, flow) and passed down.

Values come from, in order: explicit arguments, environment variables `CORAL_*`, an optional
`coral.toml`-free `.env` file, then the defaults here. Library code never reads the environment.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class SolverName(StrEnum):
    CBC = "cbc"
    HIGHS = "highs"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CORAL_", env_file=".env", extra="ignore")

    db: Path = Field(Path("coral.duckdb"), description="DuckDB catalog file")
    db_lock_timeout_s: float = Field(60.0, gt=0, description="wait this long for another writer")
    dask_scheduler: str | None = Field(
        None, description="Dask scheduler address (tcp://host:8786); None starts a LocalCluster"
    )
    dask_workers: int = Field(2, ge=1, description="workers of the LocalCluster")
    prefect_api_url: str | None = Field(
        None, description="Prefect API URL; None uses the ephemeral/local API"
    )
    aws_regions: list[str] = Field(default_factory=lambda: ["us-east-1", "us-west-2"])
    aws_profile: str | None = None
    aws_endpoint_url: str | None = Field(None, description="e.g. a moto server for tests")
    solver: SolverName = SolverName.CBC
    solver_time_limit_s: float = Field(30.0, gt=0)
    headroom: float = Field(0.1, ge=0, description="capacity margin over forecast demand")
    out_dir: Path = Field(Path("out"), description="rendered deployments and reports")


def load_settings(**overrides: object) -> Settings:
    """Build settings from the environment plus explicit overrides (None values ignored)."""
    return Settings(**{k: v for k, v in overrides.items() if v is not None})  # type: ignore[arg-type]
