"""Reference data: read and validate the bundled CSVs, then load them in one transaction.

Files (catalog_db/data/, sources in catalog_db/data/README.md):
  gpus.csv, models.csv, workload_classes.csv,
  prices/gpu_prices_skypilot_sample.csv (SkyPilot catalog rows, copied as they are),
  prices/instance_gpu_types.csv (instance type -> catalog GPU type, count; GCP price pairing).

Every file is parsed and checked before anything is written; a bad row raises `RowError`
naming file, line and field, and the catalog is left as it was. Loading twice changes nothing.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import duckdb
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

T = TypeVar("T", bound="_Row")

PositiveFloat = Annotated[float, Field(gt=0)]
PositiveInt = Annotated[int, Field(gt=0)]


class RowError(ValueError):
    """A reference row that cannot be loaded: names the file, the line and the field."""

    def __init__(self, file: str, line: int, field: str, message: str) -> None:
        super().__init__(f"{file}:{line}: field '{field}': {message}")
        self.file, self.line, self.field = file, line, field


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, str_strip_whitespace=True)

    @field_validator("*", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if value == "" else value


def _yes_no(value: Any) -> bool:
    if value in ("yes", "no"):
        return value == "yes"
    raise ValueError("must be 'yes' or 'no'")


class GpuRow(_Row):
    gpu: str
    vendor: str
    memory_gib: PositiveFloat
    hbm_bandwidth_gbps: PositiveFloat
    bf16_dense_tflops: PositiveFloat | None = None
    fp8_dense_tflops: PositiveFloat | None = None
    fp16_dense_tflops: PositiveFloat | None = None
    intra_node_link: str
    intra_node_bw_gbps: PositiveFloat
    tdp_w: PositiveFloat | None = None
    gpus_per_machine: PositiveInt
    verified: bool
    source: str

    _verified = field_validator("verified", mode="before")(lambda cls, v: _yes_no(v))


class ModelRow(_Row):
    model: str
    num_hidden_layers: PositiveInt
    hidden_size: PositiveInt
    num_attention_heads: PositiveInt
    num_key_value_heads: PositiveInt
    head_dim: PositiveInt
    intermediate_size: PositiveInt
    moe_intermediate_size: PositiveInt | None = None
    vocab_size: PositiveInt
    num_experts: PositiveInt | None = None
    num_experts_per_tok: PositiveInt | None = None
    num_shared_experts: Annotated[int, Field(ge=0)] | None = None
    first_k_dense_layers: Annotated[int, Field(ge=0)] | None = None
    attention: Literal["gqa", "mla"]
    kv_lora_rank: PositiveInt | None = None
    qk_rope_head_dim: PositiveInt | None = None
    max_position_embeddings: PositiveInt
    total_params_b: PositiveFloat
    active_params_b: PositiveFloat
    default_dtype: Literal["bf16", "fp16", "fp8"]
    verified: bool
    source: str

    _verified = field_validator("verified", mode="before")(lambda cls, v: _yes_no(v))


class WorkloadClassRow(_Row):
    workload_class: str
    input_tokens: PositiveInt
    output_tokens: PositiveInt
    ttft_slo_s: PositiveFloat
    tpot_slo_s: PositiveFloat
    description: str | None = None
    source: str


class PriceRow(_Row):
    cloud: str
    instance_type: str | None = None  # blank on GCP accelerator-only rows
    accelerator: str | None = None
    accel_count: PositiveInt | None = None
    region: str
    zone: str | None = None
    ondemand_usd_per_hr: PositiveFloat | None = None
    spot_usd_per_hr: PositiveFloat | None = None
    source_file: str
    source_commit: str


class InstanceGpuRow(_Row):
    cloud: str
    instance_type: str
    gpu_type: str
    gpu_count: PositiveInt
    price_accelerator: str | None = None
    note: str | None = None


@dataclass(frozen=True, slots=True)
class ReferenceData:
    gpus: tuple[GpuRow, ...]
    models: tuple[ModelRow, ...]
    workload_classes: tuple[WorkloadClassRow, ...]
    instances: tuple[dict[str, Any], ...]  # rows of the instance_types table


def default_data_dir() -> Path:
    return Path(str(resources.files("catalog_db").joinpath("data")))


def read_rows(path: Path, row_type: type[T], key: Sequence[str]) -> list[tuple[int, T]]:
    """Parse one CSV into validated rows with their line numbers; refuse duplicate keys."""
    name = path.name
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        required = [f for f, info in row_type.model_fields.items() if info.is_required()]
        missing = [f for f in required if f not in (reader.fieldnames or [])]
        if missing:
            raise RowError(name, 1, missing[0], "column missing from the header")
        rows: list[tuple[int, T]] = []
        seen: dict[tuple[Any, ...], int] = {}
        for record in reader:
            line = reader.line_num
            rows.append((line, _validate(name, line, row_type, record)))
            ident = tuple(getattr(rows[-1][1], k) for k in key)
            if ident in seen and key:
                raise RowError(
                    name, line, key[-1], f"duplicate key {ident} (first on line {seen[ident]})"
                )
            seen[ident] = line
    return rows


def _validate(name: str, line: int, row_type: type[T], record: dict[str, Any]) -> T:
    if None in record:
        raise RowError(name, line, "<row>", "more values than header columns")
    try:
        return row_type.model_validate(record)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "<row>"
        raise RowError(name, line, field, first["msg"]) from None


def _check_models(name: str, rows: Iterable[tuple[int, ModelRow]]) -> None:
    for line, row in rows:
        if row.num_attention_heads % row.num_key_value_heads:
            raise RowError(name, line, "num_key_value_heads", "must divide num_attention_heads")
        if row.num_experts and not row.num_experts_per_tok:
            raise RowError(name, line, "num_experts_per_tok", "required for an MoE model")
        if row.num_experts_per_tok and (row.num_experts or 0) < row.num_experts_per_tok:
            raise RowError(name, line, "num_experts_per_tok", "exceeds num_experts")
        if row.attention == "mla" and not (row.kv_lora_rank and row.qk_rope_head_dim):
            raise RowError(
                name, line, "kv_lora_rank", "MLA needs kv_lora_rank and qk_rope_head_dim"
            )
        if row.active_params_b > row.total_params_b:
            raise RowError(name, line, "active_params_b", "exceeds total_params_b")


def read_reference(data_dir: Path | None = None) -> ReferenceData:
    """Parse and cross-check every reference file; raises RowError on the first bad row."""
    base = data_dir or default_data_dir()
    gpus = read_rows(base / "gpus.csv", GpuRow, ["gpu"])
    models = read_rows(base / "models.csv", ModelRow, ["model"])
    _check_models("models.csv", models)
    classes = read_rows(base / "workload_classes.csv", WorkloadClassRow, ["workload_class"])
    gpu_names = {row.gpu for _, row in gpus}
    mapping = read_rows(
        base / "prices" / "instance_gpu_types.csv", InstanceGpuRow, ["cloud", "instance_type"]
    )
    for line, row in mapping:
        if row.gpu_type not in gpu_names:
            raise RowError(
                "instance_gpu_types.csv", line, "gpu_type", f"unknown GPU type {row.gpu_type!r}"
            )
    prices = read_rows(base / "prices" / "gpu_prices_skypilot_sample.csv", PriceRow, [])
    instances = derive_instances(prices, {(r.cloud, r.instance_type): r for _, r in mapping})
    return ReferenceData(
        gpus=tuple(r for _, r in gpus),
        models=tuple(r for _, r in models),
        workload_classes=tuple(r for _, r in classes),
        instances=tuple(instances),
    )


def derive_instances(
    prices: Sequence[tuple[int, PriceRow]], mapping: dict[tuple[str, str], InstanceGpuRow]
) -> list[dict[str, Any]]:
    """Turn catalog price rows into whole-machine instance rows.

    GCP prices a GPU VM in two rows (VM part + accelerator part, SkyPilot's convention): the
    two are summed per zone. Rows repeated for one (cloud, type, region, zone) are merged when
    they agree, keeping a spot price where one of them has it (AWS p4de lists zones twice).
    """
    name = "gpu_prices_skypilot_sample.csv"
    accel = {
        (r.accelerator, r.accel_count, r.zone): r
        for _, r in prices
        if r.cloud == "gcp" and r.instance_type is None
    }
    merged: dict[tuple[str, str, str, str], dict[str, Any]] = {}
    for line, row in prices:
        if row.instance_type is None:
            continue
        gpu = mapping.get((row.cloud, row.instance_type))
        if gpu is None:
            raise RowError(
                name,
                line,
                "instance_type",
                f"{row.cloud}/{row.instance_type} has no row in instance_gpu_types.csv",
            )
        ondemand, spot = row.ondemand_usd_per_hr, row.spot_usd_per_hr
        if row.cloud == "gcp":
            part = accel.get((gpu.price_accelerator, gpu.gpu_count, row.zone))
            if part is None:
                raise RowError(
                    name,
                    line,
                    "zone",
                    f"no GCP accelerator row {gpu.price_accelerator} x{gpu.gpu_count} in {row.zone}",
                )
            ondemand = _add(ondemand, part.ondemand_usd_per_hr)
            spot = _add(spot, part.spot_usd_per_hr)
        if row.cloud == "azure" and spot == ondemand:
            spot = None  # the v6 Azure catalog repeats on-demand where it recorded no spot price
        key = (row.cloud, row.instance_type, row.region, row.zone or "")
        new = {
            "cloud": row.cloud,
            "instance_type": row.instance_type,
            "region": row.region,
            "zone": row.zone or "",
            "gpu_type": gpu.gpu_type,
            "gpu_count": gpu.gpu_count,
            "ondemand_usd_per_hr": ondemand,
            "spot_usd_per_hr": spot,
            "source": f"skypilot-catalog {row.source_file}@{row.source_commit[:12]}",
        }
        merged[key] = _merge(name, line, merged.get(key), new)
    return list(merged.values())


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else round(a + b, 6)


def _merge(name: str, line: int, old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    if old is None:
        return new
    for field in ("ondemand_usd_per_hr", "spot_usd_per_hr"):
        if old[field] is not None and new[field] is not None and old[field] != new[field]:
            raise RowError(
                name,
                line,
                field,
                f"duplicate key {new['instance_type']} {new['zone']} with a different price",
            )
    return {k: (old[k] if old[k] is not None else new[k]) for k in new}


_GPU_SQL = """INSERT OR REPLACE INTO gpu_types VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"""
_MODEL_SQL = "INSERT OR REPLACE INTO models VALUES (" + ",".join("?" * 22) + ")"
_CLASS_SQL = "INSERT OR REPLACE INTO workload_classes VALUES (?,?,?,?,?,?)"
_INSTANCE_SQL = """INSERT OR REPLACE INTO instance_types
    (cloud, instance_type, region, zone, gpu_type, gpu_count, ondemand_usd_per_hr,
     spot_usd_per_hr, source) VALUES (?,?,?,?,?,?,?,?,?)"""


def write_reference(con: duckdb.DuckDBPyConnection, data: ReferenceData) -> dict[str, int]:
    """Upsert the reference rows (call inside a transaction); returns rows per table."""
    con.executemany(
        _GPU_SQL,
        [
            [
                g.gpu,
                g.vendor,
                g.memory_gib,
                g.hbm_bandwidth_gbps,
                g.bf16_dense_tflops,
                g.fp8_dense_tflops,
                g.fp16_dense_tflops,
                g.intra_node_link,
                g.intra_node_bw_gbps,
                g.tdp_w,
                g.gpus_per_machine,
                g.verified,
                g.source,
            ]
            for g in data.gpus
        ],
    )
    con.executemany(
        _MODEL_SQL,
        [
            [
                m.model,
                m.num_hidden_layers,
                m.hidden_size,
                m.num_attention_heads,
                m.num_key_value_heads,
                m.head_dim,
                m.intermediate_size,
                m.moe_intermediate_size,
                m.vocab_size,
                m.num_experts,
                m.num_experts_per_tok,
                m.num_shared_experts,
                m.first_k_dense_layers,
                m.attention,
                m.kv_lora_rank,
                m.qk_rope_head_dim,
                m.max_position_embeddings,
                m.total_params_b,
                m.active_params_b,
                m.default_dtype,
                m.verified,
                m.source,
            ]
            for m in data.models
        ],
    )
    con.executemany(
        _CLASS_SQL,
        [
            [
                c.workload_class,
                c.input_tokens,
                c.output_tokens,
                c.ttft_slo_s,
                c.tpot_slo_s,
                c.description,
            ]
            for c in data.workload_classes
        ],
    )
    con.executemany(
        _INSTANCE_SQL,
        [
            [
                i["cloud"],
                i["instance_type"],
                i["region"],
                i["zone"],
                i["gpu_type"],
                i["gpu_count"],
                i["ondemand_usd_per_hr"],
                i["spot_usd_per_hr"],
                i["source"],
            ]
            for i in data.instances
        ],
    )
    return {
        "gpu_types": len(data.gpus),
        "models": len(data.models),
        "workload_classes": len(data.workload_classes),
        "instance_types": len(data.instances),
    }
