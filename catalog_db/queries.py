"""Typed questions over the reference tables: the connection first, domain values out."""

from __future__ import annotations

import duckdb

from planning.domain import Dtype, GpuType, InstanceType, ModelArch

_GPU_COLUMNS = (
    "gpu_type, vendor, memory_gib, hbm_bandwidth_gbps, bf16_dense_tflops, fp8_dense_tflops, "
    "fp16_dense_tflops, intra_node_link, intra_node_bw_gbps, tdp_w, gpus_per_machine, "
    "verified, source"
)
_MODEL_COLUMNS = (
    "model, num_layers, hidden_size, num_heads, num_kv_heads, head_dim, intermediate_size, "
    "moe_intermediate_size, vocab_size, num_experts, num_experts_per_tok, num_shared_experts, "
    "first_k_dense_layers, attention, kv_lora_rank, qk_rope_head_dim, max_position_embeddings, "
    "total_params_b, active_params_b, default_dtype, verified, source"
)
_INSTANCE_COLUMNS = (
    "cloud, instance_type, region, zone, gpu_type, gpu_count, vcpus, memory_gib, "
    "ondemand_usd_per_hr, spot_usd_per_hr, source"
)


def gpu_types(con: duckdb.DuckDBPyConnection) -> tuple[GpuType, ...]:
    rows = con.execute(f"SELECT {_GPU_COLUMNS} FROM gpu_types ORDER BY gpu_type").fetchall()
    return tuple(GpuType(*row) for row in rows)


def gpu_type(con: duckdb.DuckDBPyConnection, name: str) -> GpuType:
    row = con.execute(f"SELECT {_GPU_COLUMNS} FROM gpu_types WHERE gpu_type = ?", [name]).fetchone()
    if row is None:
        raise KeyError(f"unknown GPU type {name!r}; see `coral catalog gpus`")
    return GpuType(*row)


def _model(row: tuple) -> ModelArch:
    values = list(row)
    values[19] = Dtype(values[19])
    return ModelArch(*values)


def models(con: duckdb.DuckDBPyConnection) -> tuple[ModelArch, ...]:
    rows = con.execute(f"SELECT {_MODEL_COLUMNS} FROM models ORDER BY model").fetchall()
    return tuple(_model(row) for row in rows)


def model(con: duckdb.DuckDBPyConnection, name: str) -> ModelArch:
    row = con.execute(f"SELECT {_MODEL_COLUMNS} FROM models WHERE model = ?", [name]).fetchone()
    if row is None:
        raise KeyError(f"unknown model {name!r}; see `coral catalog models`")
    return _model(row)


def instance_types(
    con: duckdb.DuckDBPyConnection, cloud: str | None = None
) -> tuple[InstanceType, ...]:
    rows = con.execute(
        f"SELECT {_INSTANCE_COLUMNS} FROM instance_types WHERE ? IS NULL OR cloud = ? "
        "ORDER BY cloud, instance_type, region, zone",
        [cloud, cloud],
    ).fetchall()
    return tuple(InstanceType(*row) for row in rows)


def table_counts(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Row count of every base table in the catalog (the `make demo` summary)."""
    names = [
        r[0]
        for r in con.execute(
            "SELECT table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' ORDER BY table_name"
        ).fetchall()
    ]
    return {n: int(con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]) for n in names}  # type: ignore[index]
