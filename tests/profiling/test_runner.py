"""Dask execution into the catalog: complete grids, resume after a kill, bad inputs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from catalog_db.connection import read_connection
from catalog_db.profiles import duplicate_keys, read_points, stage_point_counts
from planning.perf_table import build_tables
from profiling.analytic import ProfileInputError
from profiling.base_backend import BackendName
from profiling.grid import Shapes, build_jobs
from profiling.runner import load_inputs, run_profiling

SHAPES = Shapes(
    prefill_batch_sizes=(1, 8),
    prefill_seq_lens=(128, 2048),
    decode_batch_sizes=(1, 64),
    decode_seq_lens=(512, 4096),
)
ROOT = Path(__file__).resolve().parents[2]


def _expected_points(db: Path, models: list[str], gpus: list[str], shapes: Shapes) -> int:
    archs, gpu_types = load_inputs(db, models, gpus)
    return sum(j.num_points for j in build_jobs(archs, gpu_types, BackendName.ANALYTIC, shapes))


def test_local_cluster_writes_complete_grids_and_a_rerun_skips_them(catalog_path: Path) -> None:
    models, gpus = ["Qwen/Qwen3-8B", "mistralai/Mixtral-8x7B-v0.1"], ["L40S", "A10G"]
    summary = run_profiling(catalog_path, models, gpus, BackendName.ANALYTIC, n_workers=2,
                            shapes=SHAPES, write_batch_points=50)  # fmt: skip
    expected = _expected_points(catalog_path, models, gpus, SHAPES)
    assert summary.workers == 2 and summary.jobs_skipped == 0
    assert summary.points_written == expected
    with read_connection(catalog_path) as con:
        points = read_points(con)
    assert len(points) == expected
    tables = build_tables(points)  # raises on any hole in a grid
    assert len(tables) == summary.jobs_run
    again = run_profiling(catalog_path, models, gpus, BackendName.ANALYTIC, shapes=SHAPES)
    assert again.jobs_skipped == again.jobs_total and again.points_written == 0


def test_unknown_names_are_refused_naming_them(catalog_path: Path) -> None:
    with pytest.raises(ProfileInputError, match="'no/such-model'"):
        run_profiling(catalog_path, ["no/such-model"], ["H100-SXM"], n_workers=1)
    with pytest.raises(ProfileInputError, match="'H999'"):
        run_profiling(catalog_path, ["Qwen/Qwen3-8B"], ["H999"], n_workers=1)
    with pytest.raises(ValueError, match="'fast'"):
        run_profiling(catalog_path, ["Qwen/Qwen3-8B"], ["H100-SXM"], backend="fast")


_CRASHING_RUN = """
import os, signal, sys
from fractions import Fraction  # the repr of Shapes.layer_fractions may hold one
from profiling.grid import Shapes
from profiling.runner import run_profiling
shapes = Shapes(**{shapes!r})

def crash_after_first_write(done, total, written):
    if written > 0:
        os.kill(os.getpid(), signal.SIGKILL)  # a crash right after a committed batch

run_profiling(sys.argv[1], {models!r}, {gpus!r}, "analytic", processes=False, n_workers=1,
              shapes=shapes, write_batch_points=1, on_progress=crash_after_first_write)
"""


def test_resume_after_a_killed_run_completes_without_duplicates(catalog_path: Path) -> None:
    models, gpus = ["Qwen/Qwen3-8B", "meta-llama/Llama-2-7b-hf"], ["L4", "T4", "A10G"]
    shapes = {f: getattr(SHAPES, f) for f in SHAPES.__dataclass_fields__}
    script = textwrap.dedent(_CRASHING_RUN).format(shapes=shapes, models=models, gpus=gpus)
    crashed = subprocess.run([sys.executable, "-c", script, str(catalog_path)], cwd=ROOT,
                             capture_output=True, text=True, timeout=240)  # fmt: skip
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    expected = _expected_points(catalog_path, models, gpus, SHAPES)
    with read_connection(catalog_path) as con:
        partial = sum(stage_point_counts(con).values())
    assert 0 < partial < expected  # the kill left part of the grid

    resumed = run_profiling(catalog_path, models, gpus, BackendName.ANALYTIC, n_workers=1,
                            processes=False, shapes=SHAPES)  # fmt: skip
    assert resumed.jobs_skipped > 0 and resumed.points_written == expected - partial
    with read_connection(catalog_path) as con:
        assert duplicate_keys(con) == 0
        points = read_points(con)
    assert len(points) == expected
    build_tables(points)  # every grid complete
    assert os.path.exists(catalog_path)
