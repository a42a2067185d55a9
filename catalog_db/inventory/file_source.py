"""File inventory: a YAML or CSV a user writes for on-prem pools or clouds without an API.

Columns / keys per row (example: catalog_db/data/inventory/example_inventory.yaml):
  instance_type (required), region (required), count (required, machines, >= 0),
  price_usd_per_hr (machine price; required), cloud (default 'onprem'), zone (default ''),
  pricing ('on_demand' | 'spot', default 'on_demand'), gpu_type and gpu_count (required unless
  the catalog's instance_types table knows the cloud's instance type).
YAML: a top-level list of rows, or a mapping with the list under `offers`.
Every row is validated; all errors are reported together, each naming file, line and field.
A gpu_type the catalog does not know is kept and flagged (known_gpu false), not refused.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog_db.inventory.base_source import (
    InventoryItem,
    InventoryRead,
    InventoryReadError,
    SourceName,
)
from catalog_db.inventory.gpu_names import CatalogReference
from planning.domain import Pricing


class InventoryFileError(InventoryReadError):
    """One or more bad rows; each problem is written `file:line: field 'x': message`."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__("inventory file refused: " + "; ".join(problems))
        self.problems = tuple(problems)


class FileRow(BaseModel):
    """One row as a user writes it (pydantic at the edge; converted to InventoryItem at once)."""

    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)

    instance_type: str = Field(min_length=1)
    region: str = Field(min_length=1)
    count: Annotated[int, Field(ge=0)]
    price_usd_per_hr: Annotated[float, Field(gt=0)]
    cloud: str = Field("onprem", min_length=1)
    zone: str = ""
    pricing: Pricing = Pricing.ON_DEMAND
    gpu_type: str | None = None
    gpu_count: Annotated[int, Field(gt=0)] | None = None


@dataclass(frozen=True, slots=True)
class RawRow:
    """A row before validation, with the line of the row and of each field."""

    line: int
    values: dict[str, Any]
    field_lines: dict[str, int]


def _yaml_rows(text: str, name: str) -> list[RawRow]:
    """Rows of a YAML file with line numbers (from the composed node tree)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise InventoryFileError([f"{name}:{line}: field '<file>': not valid YAML"]) from None
    if isinstance(root, yaml.MappingNode):
        for key, value in root.value:
            if key.value == "offers":
                root = value
        data = data.get("offers") if isinstance(data, dict) else data
    if not isinstance(root, yaml.SequenceNode) or not isinstance(data, list):
        raise InventoryFileError([f"{name}:1: field 'offers': expected a list of rows"])
    rows = []
    for node, values in zip(root.value, data, strict=True):
        lines = {}
        if isinstance(node, yaml.MappingNode):
            lines = {key.value: key.start_mark.line + 1 for key, _ in node.value}
        rows.append(RawRow(node.start_mark.line + 1, values, lines))
    return rows


def _csv_rows(text: str) -> list[RawRow]:
    reader = csv.DictReader(text.splitlines())
    rows = []
    for record in reader:
        extra = record.pop(None, None)  # values beyond the header
        values: dict[str, Any] = dict(record)
        if extra:
            values["<row>"] = extra
        rows.append(RawRow(reader.line_num, values, {}))
    return rows


def read_raw_rows(path: Path) -> list[RawRow]:
    """Rows of a .yaml/.yml or .csv file (by extension)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise InventoryReadError(f"cannot read inventory file {path}: {error.strerror}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        return _yaml_rows(text, path.name)
    if path.suffix.lower() == ".csv":
        return _csv_rows(text)
    raise InventoryReadError(f"inventory file {path.name}: use a .yaml, .yml or .csv file")


def validate_row(name: str, raw: RawRow) -> tuple[FileRow | None, list[str]]:
    """A FileRow, or the problems found, each naming file, line and field."""
    if not isinstance(raw.values, dict):
        return None, [f"{name}:{raw.line}: field '<row>': expected a mapping of fields"]
    # A blank cell or an empty YAML value means "use the default".
    values = {k: v for k, v in raw.values.items() if v not in ("", None)}
    try:
        return FileRow.model_validate(values), []
    except ValidationError as error:
        problems = []
        for issue in error.errors():
            field = ".".join(str(part) for part in issue["loc"]) or "<row>"
            line = raw.field_lines.get(field, raw.line)
            problems.append(f"{name}:{line}: field '{field}': {issue['msg']}")
        return None, problems


def to_item(
    name: str, line: int, row: FileRow, reference: CatalogReference
) -> tuple[InventoryItem | None, list[str]]:
    """Resolve the GPU (given, or from the catalog's instance types) and build the item."""
    known = reference.known_instance(row.cloud, row.instance_type)
    gpu_type = row.gpu_type or (known.gpu_type if known else None)
    gpu_count = row.gpu_count or (known.gpu_count if known else None)
    if gpu_type is None or gpu_count is None:
        missing = "gpu_type" if gpu_type is None else "gpu_count"
        problem = f"{name}:{line}: field '{missing}': required ({row.instance_type} is not in the catalog)"
        return None, [problem]
    known_gpu = gpu_type in reference.gpu_types
    note = "" if known_gpu else f" (gpu_type {gpu_type} unknown to the catalog)"
    item = InventoryItem(
        cloud=row.cloud,
        region=row.region,
        zone=row.zone,
        instance_type=row.instance_type,
        pricing=row.pricing,
        gpu_type=gpu_type if known_gpu else None,
        gpu_count=gpu_count,
        price_usd_per_hr=row.price_usd_per_hr,
        available_count=row.count,
        known_gpu=known_gpu,
        provenance=f"file {name}:{line}{note}",
    )
    return item, []


def _key(item: InventoryItem) -> tuple[str, ...]:
    return (item.cloud, item.region, item.zone, item.instance_type, item.pricing.value)


@dataclass(frozen=True, slots=True)
class FileSource:
    """Reads a user-written inventory file; raises InventoryFileError listing every bad row."""

    path: Path | str
    name: SourceName = SourceName.FILE

    def read(self, reference: CatalogReference) -> InventoryRead:
        path = Path(self.path)
        items: list[InventoryItem] = []
        problems: list[str] = []
        seen: dict[tuple[str, ...], int] = {}
        for raw in read_raw_rows(path):
            row, found = validate_row(path.name, raw)
            item, more = to_item(path.name, raw.line, row, reference) if row else (None, [])
            problems.extend(found + more)
            if item is not None and _key(item) in seen:
                first = seen[_key(item)]
                problems.append(
                    f"{path.name}:{raw.line}: field 'instance_type': duplicate row "
                    f"(first on line {first})"
                )
            elif item is not None:
                seen[_key(item)] = raw.line
                items.append(item)
        if problems:
            raise InventoryFileError(problems)
        regions = tuple(sorted({item.region for item in items}))
        return InventoryRead(SourceName.FILE, regions, tuple(items), params={"file": str(path)})
