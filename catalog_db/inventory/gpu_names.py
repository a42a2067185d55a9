"""Mapping rented machines to the catalog's GPU types.

Order of evidence: (1) the catalog's `instance_types` table names the GPU of an instance type
it knows (curated, see catalog_db/data/prices/instance_gpu_types.csv); (2) otherwise a cloud's
own GPU name plus per-GPU memory is looked up in `catalog_db/data/inventory/aws_gpu_names.csv`
(one row per (name, memory) with its source). Anything else is unknown: kept, flagged.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import duckdb

from catalog_db import queries
from planning.domain import InstanceType

# A cloud reports usable memory (A10G: 22888 MiB for a 24 GB part), so match within 15 %.
MEMORY_TOLERANCE = 0.15


@dataclass(frozen=True, slots=True)
class GpuAlias:
    """One cloud GPU name at one nominal memory size, as the catalog's GPU type."""

    cloud_gpu_name: str
    memory_gib: float
    gpu_type: str


@dataclass(frozen=True, slots=True)
class CatalogReference:
    """What sources need from the catalog, read once before a source runs."""

    gpu_types: frozenset[str]
    instances: tuple[InstanceType, ...]  # rows of instance_types: one per type, region, zone
    aliases: tuple[GpuAlias, ...]

    def known_instance(self, cloud: str, instance_type: str) -> InstanceType | None:
        """Any catalog row of this cloud's instance type (GPU type and count are per type)."""
        for known in self.instances:
            if known.cloud == cloud and known.instance_type == instance_type:
                return known
        return None

    def gpu_by_name(self, cloud_gpu_name: str, memory_mib: float) -> str | None:
        """The catalog GPU type of a cloud GPU name with `memory_mib` per GPU, or None."""
        memory_gib = memory_mib / 1024
        for alias in self.aliases:
            close = abs(memory_gib - alias.memory_gib) <= MEMORY_TOLERANCE * alias.memory_gib
            same_name = alias.cloud_gpu_name.lower() == cloud_gpu_name.lower()
            if same_name and close and alias.gpu_type in self.gpu_types:
                return alias.gpu_type
        return None


def default_aliases_path() -> Path:
    return Path(str(resources.files("catalog_db").joinpath("data/inventory/aws_gpu_names.csv")))


def read_aliases(path: Path | None = None) -> tuple[GpuAlias, ...]:
    with (path or default_aliases_path()).open(newline="", encoding="utf-8") as handle:
        return tuple(
            GpuAlias(row["aws_gpu_name"], float(row["memory_gib"]), row["gpu_type"])
            for row in csv.DictReader(handle)
        )


def load_reference(con: duckdb.DuckDBPyConnection) -> CatalogReference:
    """Read GPU types and known instance types from an open catalog connection."""
    return CatalogReference(
        gpu_types=frozenset(g.gpu_type for g in queries.gpu_types(con)),
        instances=queries.instance_types(con),
        aliases=read_aliases(),
    )
