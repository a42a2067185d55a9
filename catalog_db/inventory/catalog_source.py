"""Catalog inventory: the bundled reference prices with a user-set machine count per type.

The embedded default for `make demo` and for planning without cloud access. One row per
(cloud, instance type, region, pricing), zone '' (the count is per region): the price is the
cheapest zone's reference price in `instance_types` (SkyPilot catalog sample, see
catalog_db/data/prices/SOURCE.md). Counts are not facts: they come from `count` (every type)
or from catalog_db/data/inventory/catalog_counts.csv (demo defaults; unlisted types get 0).
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from catalog_db.inventory.base_source import (
    InventoryItem,
    InventoryRead,
    InventoryReadError,
    SourceName,
)
from catalog_db.inventory.gpu_names import CatalogReference
from planning.domain import InstanceType, Pricing


def default_counts_path() -> Path:
    return Path(str(resources.files("catalog_db").joinpath("data/inventory/catalog_counts.csv")))


def read_counts(path: Path) -> dict[tuple[str, str], int]:
    """(cloud, instance type) -> machines per region, from a counts CSV."""
    counts: dict[tuple[str, str], int] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        for record in reader:
            try:
                value = int(record["count_per_region"])
            except (KeyError, TypeError, ValueError):
                value = -1
            if value < 0:
                raise InventoryReadError(
                    f"{path.name}:{reader.line_num}: field 'count_per_region': "
                    "must be an integer >= 0"
                )
            counts[(record["cloud"], record["instance_type"])] = value
    return counts


def cheapest_by_region(
    rows: Sequence[InstanceType],
) -> dict[tuple[str, str, str, Pricing], tuple[InstanceType, float, str]]:
    """(cloud, type, region, pricing) -> (row, cheapest zone price, that zone)."""
    best: dict[tuple[str, str, str, Pricing], tuple[InstanceType, float, str]] = {}
    for row in rows:
        for pricing, price in (
            (Pricing.ON_DEMAND, row.ondemand_usd_per_hr),
            (Pricing.SPOT, row.spot_usd_per_hr),
        ):
            key = (row.cloud, row.instance_type, row.region, pricing)
            if price is not None and (key not in best or price < best[key][1]):
                best[key] = (row, price, row.zone)
    return best


@dataclass(frozen=True, slots=True)
class CatalogSource:
    """Reference prices from the catalog; `count` overrides the per-type counts file."""

    count: int | None = None
    counts_path: Path | str | None = None
    regions: Sequence[str] | None = None
    clouds: Sequence[str] | None = None
    name: SourceName = SourceName.CATALOG

    def read(self, reference: CatalogReference) -> InventoryRead:
        if self.count is not None and self.count < 0:
            raise InventoryReadError("catalog source: count must be >= 0")
        counts_file = Path(self.counts_path or default_counts_path())
        counts = {} if self.count is not None else read_counts(counts_file)
        rows = [
            r
            for r in reference.instances
            if (self.regions is None or r.region in self.regions)
            and (self.clouds is None or r.cloud in self.clouds)
        ]
        items = []
        for (cloud, instance_type, region, pricing), (row, price, zone) in sorted(
            cheapest_by_region(rows).items()
        ):
            available = (
                self.count if self.count is not None else counts.get((cloud, instance_type), 0)
            )
            items.append(
                InventoryItem(
                    cloud=cloud,
                    region=region,
                    zone="",
                    instance_type=instance_type,
                    pricing=pricing,
                    gpu_type=row.gpu_type,
                    gpu_count=row.gpu_count,
                    price_usd_per_hr=price,
                    available_count=available,
                    known_gpu=True,
                    provenance=f"catalog instance_types (cheapest zone {zone or '-'}; {row.source})",
                )
            )
        params = {"count": self.count, "counts_file": None if self.count else str(counts_file)}
        regions = tuple(sorted({item.region for item in items}))
        return InventoryRead(SourceName.CATALOG, regions, tuple(items), params=params)
