"""Calibration: the stored constants reproduce the tables within the error they report."""

from __future__ import annotations

import numpy as np
import pytest

from planning.domain import Dtype, Phase
from profiling.analytic import Efficiency, StageSpec
from profiling.calibration import (
    Observation,
    SearchGrid,
    efficiencies,
    fit_efficiency,
    fit_report,
    memory_constants,
    predict_ms,
    published_observations,
    published_rows,
    relative_errors,
)


def test_published_table_is_reproduced_within_the_reported_error(models, gpus) -> None:
    observations = published_observations(published_rows(), models, gpus)
    effs = efficiencies()
    for row in (r for r in fit_report() if r.reference == "published"):
        family_obs = [
            o for o in observations
            if {"cdna3": "MI300X", "hopper": "H200-SXM"}[row.family] == o.spec.gpu.gpu_type
        ]  # fmt: skip
        errors = np.abs(relative_errors(family_obs, effs[row.family], memory_constants()))
        assert len(errors) == row.points
        assert float(np.median(errors)) == pytest.approx(row.median_abs_err, abs=1e-3)
        assert float(errors.max()) <= row.max_abs_err + 1e-3


def test_every_family_has_constants_with_a_source() -> None:
    import csv

    from profiling.calibration import calibration_dir

    rows = list(csv.DictReader((calibration_dir() / "efficiency.csv").open()))
    assert {"default", "hopper", "ampere", "ada", "blackwell", "cdna3"} <= {
        r["family"] for r in rows
    }
    for row in rows:
        assert row["source"] and 0 < float(row["mfu"]) <= 1 and 0 < float(row["mbu"]) <= 1


def test_fit_recovers_constants_that_generated_the_observations(models, gpus) -> None:
    truth = Efficiency("synthetic", 0.55, 0.8, 20.0, 0.5)
    constants = memory_constants()
    spec = StageSpec(models["Qwen/Qwen3-8B"], gpus["L40S"], 1, 36, Dtype.BF16)
    observations = [
        Observation(spec, str(phase), b, s, 0, 1.0, "synthetic")
        for phase, batches, seqs in (
            (Phase.PREFILL, (1, 4, 16), (128, 1024, 4096)),
            (Phase.DECODE, (1, 32, 256), (512, 4096)),
        )
        for b in batches
        for s in seqs
    ]
    observations = [
        Observation(
            o.spec, o.kind, o.batch_size, o.input_tokens, 0, predict_ms(o, truth, constants), "x"
        )
        for o in observations
    ]
    grid = SearchGrid(mfu=(0.45, 0.55, 0.65), mbu=(0.7, 0.8, 0.9),
                      layer_overhead_us=(0.0, 20.0), step_overhead_ms=(0.5, 1.0))  # fmt: skip
    fit = fit_efficiency("synthetic", observations, constants, grid)
    assert fit.efficiency == truth
    assert fit.max_abs_err == pytest.approx(0.0, abs=1e-12)
