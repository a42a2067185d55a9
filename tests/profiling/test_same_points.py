"""The optimised profiling path writes the same points as the path it replaced.

`data/auto_small_reference.csv` was written by the runner before the speed work (commit
2679222: one Dask task per GPU for AIConfigurator, PyYAML's pure-Python loader, per-job
analytic grids) for 2 models x 3 GPU types with the auto backend; AIConfigurator and
analytic rows, an A100 MoE fallback and interpolated layer counts are all in it.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from profiling.grid import Shapes
from profiling.runner import run_profiling

REFERENCE = Path(__file__).parent / "data" / "auto_small_reference.csv"
SHAPES = Shapes(
    prefill_batch_sizes=(1, 8),
    prefill_seq_lens=(128, 2048),
    decode_batch_sizes=(1, 64),
    decode_seq_lens=(512, 4096),
    layer_fractions=(1, 2, 4, 8),
)
MODELS = ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B"]
GPUS = ["H100-SXM", "A100-SXM-80GB", "T4"]
COLUMNS = ("model, gpu_type, tp, num_layers, phase, dtype, batch_size, seq_len_tokens, backend, "
           "latency_ms, weights_gib, kv_gib_per_token, max_kv_tokens")  # fmt: skip


def _reference() -> list[tuple]:
    with REFERENCE.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))[1:]
    kinds = (str, str, int, int, str, str, int, int, str, float, float, float, int)
    return [tuple(kind(v) for kind, v in zip(kinds, row, strict=True)) for row in rows]


def test_optimised_run_writes_the_reference_points(catalog_path: Path) -> None:
    run_profiling(catalog_path, MODELS, GPUS, "auto", n_workers=2, shapes=SHAPES, processes=False)
    with read_connection(catalog_path) as con:
        got = con.execute(f"SELECT {COLUMNS} FROM profiles ORDER BY ALL").fetchall()
    expected = _reference()
    assert [row[:9] for row in got] == [row[:9] for row in expected]
    for row, ref in zip(got, expected, strict=True):
        assert row[12] == ref[12], row[:8]
        assert row[9:12] == pytest.approx(ref[9:12], rel=1e-9), row[:8]
