import csv
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from catalog_db.queries import instance_types, model, table_counts
from catalog_db.reference import RowError, default_data_dir, read_reference
from catalog_db.setup import init_catalog


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(default_data_dir(), target)
    return target


def _edit(path: Path, change: Callable[[list[dict[str, str]]], None]) -> None:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    change(rows)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)


def _set(index: int, field: str, value: str) -> Callable[[list[dict[str, str]]], None]:
    def change(rows: list[dict[str, str]]) -> None:
        rows[index][field] = value

    return change


BAD_ROWS = [
    # (file, change, expected line, expected field, message fragment)
    ("gpus.csv", _set(2, "memory_gib", ""), 4, "memory_gib", "number"),
    ("gpus.csv", _set(0, "hbm_bandwidth_gbps", "-5"), 2, "hbm_bandwidth_gbps", "greater than 0"),
    ("gpus.csv", _set(1, "gpus_per_machine", "0"), 3, "gpus_per_machine", "greater than 0"),
    ("gpus.csv", _set(3, "verified", "maybe"), 5, "verified", "'yes' or 'no'"),
    ("gpus.csv", _set(1, "bf16_dense_tflops", "fast"), 3, "bf16_dense_tflops", "number"),
    ("gpus.csv", _set(1, "gpu", "H200-SXM"), 3, "gpu", "duplicate key"),
    ("models.csv", _set(0, "attention", "sliding"), 2, "attention", "'gqa' or 'mla'"),
    ("models.csv", _set(0, "num_key_value_heads", "7"), 2, "num_key_value_heads", "divide"),
    ("models.csv", _set(1, "default_dtype", "int4"), 3, "default_dtype", "bf16"),
    ("models.csv", _set(1, "num_hidden_layers", ""), 3, "num_hidden_layers", "integer"),
    (
        "prices/instance_gpu_types.csv",
        _set(0, "gpu_type", "TPU-v5"),
        2,
        "gpu_type",
        "unknown GPU type",
    ),
    (
        "prices/gpu_prices_skypilot_sample.csv",
        _set(0, "ondemand_usd_per_hr", "0"),
        2,
        "ondemand_usd_per_hr",
        "greater than 0",
    ),
    (
        "prices/gpu_prices_skypilot_sample.csv",
        _set(0, "instance_type", "g99.huge"),
        2,
        "instance_type",
        "no row in instance_gpu_types.csv",
    ),
    ("workload_classes.csv", _set(0, "ttft_slo_s", "-1"), 2, "ttft_slo_s", "greater than 0"),
]


@pytest.mark.parametrize(("file", "change", "line", "field", "fragment"), BAD_ROWS)
def test_bad_row_is_refused_with_file_line_field(
    data_dir: Path,
    catalog_path: Path,
    file: str,
    change: Callable,
    line: int,
    field: str,
    fragment: str,
) -> None:
    _edit(data_dir / file, change)
    with read_connection(catalog_path) as con:
        before = con.execute("SELECT * FROM gpu_types ORDER BY 1").fetchall(), table_counts(con)
    with pytest.raises(RowError) as caught:
        init_catalog(catalog_path, data_dir=data_dir)
    error = caught.value
    assert (error.file, error.line, error.field) == (Path(file).name, line, field)
    assert fragment in str(error)
    with read_connection(catalog_path) as con:
        assert (
            con.execute("SELECT * FROM gpu_types ORDER BY 1").fetchall(),
            table_counts(con),
        ) == before


def test_missing_header_column_is_named(data_dir: Path) -> None:
    path = data_dir / "models.csv"
    text = path.read_text().splitlines()
    text[0] = text[0].replace("vocab_size", "vocab")
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(RowError, match="field 'vocab_size': column missing"):
        read_reference(data_dir)


def test_bad_row_in_a_fresh_catalog_writes_nothing(data_dir: Path, tmp_path: Path) -> None:
    _edit(data_dir / "models.csv", _set(5, "hidden_size", "-1"))
    target = tmp_path / "fresh.duckdb"
    with pytest.raises(RowError):
        init_catalog(target, data_dir=data_dir)
    assert not target.exists()


def test_second_load_changes_nothing(catalog_path: Path) -> None:
    def snapshot() -> list:
        with read_connection(catalog_path) as con:
            return [
                con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
                for t in ("gpu_types", "models", "instance_types", "workload_classes")
            ]

    first = snapshot()
    summary = init_catalog(catalog_path)
    assert summary.migrations_applied == ()
    assert snapshot() == first


def test_reference_coverage(catalog_path: Path) -> None:
    with read_connection(catalog_path) as con:
        counts = table_counts(con)
        clouds = {i.cloud for i in instance_types(con)}
        deepseek = model(con, "deepseek-ai/DeepSeek-V3")
    assert counts["gpu_types"] >= 20
    assert counts["models"] >= 10
    assert {"aws", "gcp", "azure"} <= clouds
    assert deepseek.attention == "mla" and deepseek.is_moe


def test_gcp_price_is_vm_plus_accelerator(catalog_path: Path) -> None:
    # SkyPilot's GCP catalog prices the VM and the GPUs in separate rows (see prices/SOURCE.md):
    # a3-highgpu-8g us-central1-a = VM 9.46006 + 8x H100 33.60609.
    vm = acc = None
    path = default_data_dir() / "prices" / "gpu_prices_skypilot_sample.csv"
    for row in csv.DictReader(path.open()):
        if row["cloud"] == "gcp" and row["zone"] == "us-central1-a":
            if row["instance_type"] == "a3-highgpu-8g":
                vm = float(row["ondemand_usd_per_hr"])
            if (
                row["instance_type"] == ""
                and row["accelerator"] == "H100"
                and row["accel_count"] == "8"
            ):
                acc = float(row["ondemand_usd_per_hr"])
    assert vm and acc
    with read_connection(catalog_path) as con:
        price = con.execute(
            "SELECT ondemand_usd_per_hr FROM instance_types WHERE cloud='gcp' "
            "AND instance_type='a3-highgpu-8g' AND zone='us-central1-a'"
        ).fetchone()
    assert price is not None and price[0] == pytest.approx(vm + acc)


def test_duplicate_zone_rows_are_merged_keeping_spot(catalog_path: Path) -> None:
    with read_connection(catalog_path) as con:
        rows = con.execute(
            "SELECT spot_usd_per_hr FROM instance_types WHERE instance_type='p4de.24xlarge' "
            "AND zone='use1-az4'"
        ).fetchall()
    assert len(rows) == 1 and rows[0][0] == pytest.approx(7.8074)
