"""The inventory source protocol, its result values and the registry of variants.

A source turns the outside world (an AWS account, a file, the bundled price catalog) into
`InventoryItem`s: machines of one instance type in one region (and zone, when the source knows
availability per zone) at one pricing class, with a whole-machine price and an available count.
Sources do not touch the catalog file: `snapshots.take_snapshot` loads the `CatalogReference`
they need beforehand, so no DuckDB lock is held while a cloud API is slow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from catalog_db.inventory.gpu_names import CatalogReference
from planning.domain import Pricing


class SourceName(StrEnum):
    AWS = "aws"
    FILE = "file"
    CATALOG = "catalog"


class InventoryReadError(RuntimeError):
    """A read that produced no usable inventory. The message is plain and safe to store:
    it never contains credentials or tokens."""


@dataclass(frozen=True, slots=True)
class InventoryItem:
    """One row of a snapshot. `gpu_type` is None (and `known_gpu` False) when the machine's GPU
    is not in the catalog: such rows are kept so a user sees them, but never offered to the
    planner. `price_usd_per_hr` is per machine; None when the source has no price."""

    cloud: str
    region: str
    zone: str
    instance_type: str
    pricing: Pricing
    gpu_type: str | None
    gpu_count: int
    price_usd_per_hr: float | None
    available_count: int
    known_gpu: bool
    provenance: str


@dataclass(frozen=True, slots=True)
class InventoryRead:
    """What one successful read returned. Non-empty `warnings` make the snapshot 'partial'."""

    source: SourceName
    regions: tuple[str, ...]
    items: tuple[InventoryItem, ...]
    warnings: tuple[str, ...] = ()
    params: dict[str, Any] = field(default_factory=dict)


class InventorySource(Protocol):
    """Anything that can read an inventory; raises InventoryReadError on failure."""

    @property
    def name(self) -> SourceName: ...

    def read(self, reference: CatalogReference) -> InventoryRead: ...


def _aws(**kwargs: Any) -> InventorySource:
    from catalog_db.inventory.aws_source import AwsSource

    return AwsSource(**kwargs)


def _file(**kwargs: Any) -> InventorySource:
    from catalog_db.inventory.file_source import FileSource

    return FileSource(**kwargs)


def _catalog(**kwargs: Any) -> InventorySource:
    from catalog_db.inventory.catalog_source import CatalogSource

    return CatalogSource(**kwargs)


# Variants are imported on use: reading a file should not need boto3 to import.
SOURCES: dict[SourceName, Callable[..., InventorySource]] = {
    SourceName.AWS: _aws,
    SourceName.FILE: _file,
    SourceName.CATALOG: _catalog,
}


def make_source(name: SourceName | str, **kwargs: Any) -> InventorySource:
    """Build the named source; keyword arguments go to its constructor (None values dropped)."""
    return SOURCES[SourceName(name)](**{k: v for k, v in kwargs.items() if v is not None})
