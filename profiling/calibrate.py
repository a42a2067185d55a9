"""Refit the analytic model's efficiency constants: `python -m profiling.calibrate [--db PATH]`.

References: AIConfigurator's vLLM predictions on the GPUs it covers (one family each:
hopper = H100-SXM + H200-SXM, ampere = A100-SXM-80GB, ada = L40S, blackwell = B200) over
`REFERENCE_STAGES` x `REFERENCE_SHAPES`, and the published MI300X vLLM rows for cdna3.
Families without references get the median of the fitted families ('default').
The published TensorRT-LLM H200 rows are not fitted (another engine): they are reported as
the hopper constants' error. Writes efficiency.csv and fit_report.csv.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from catalog_db import queries
from catalog_db.connection import read_connection
from catalog_db.setup import init_catalog
from planning.domain import GpuType, ModelArch, Phase
from profiling.aic_backend import aic_result
from profiling.analytic import Efficiency, StageSpec
from profiling.base_backend import BackendName, ProfileJob
from profiling.calibration import (
    FitResult,
    Observation,
    ReportRow,
    calibration_dir,
    fit_efficiency,
    memory_constants,
    published_observations,
    published_rows,
    relative_errors,
)
from profiling.grid import feasible_tps

AIC_FAMILIES = {
    "hopper": ("H100-SXM", "H200-SXM"),
    "ampere": ("A100-SXM-80GB",),
    "ada": ("L40S",),
    "blackwell": ("B200",),
}
REFERENCE_STAGES = (  # (model, TP): dense and MoE, small and large
    ("meta-llama/Llama-3.1-8B-Instruct", 1),
    ("meta-llama/Llama-3.1-8B-Instruct", 2),
    ("Qwen/Qwen3-32B", 2),
    ("meta-llama/Llama-3.1-70B-Instruct", 4),
    ("Qwen/Qwen3-30B-A3B", 1),
    ("mistralai/Mixtral-8x7B-v0.1", 2),
)
REFERENCE_SHAPES = {
    Phase.PREFILL: ((1, 4, 16), (128, 512, 2048, 8192)),
    Phase.DECODE: ((1, 8, 64, 256), (128, 1024, 4096)),
}


def aic_observations(
    models: dict[str, ModelArch], gpus: Sequence[GpuType]
) -> tuple[Observation, ...]:
    """AIConfigurator latencies of the reference stages on `gpus` (fallbacks dropped)."""
    observations: list[Observation] = []
    for gpu in gpus:
        for name, tp in REFERENCE_STAGES:
            model = models[name]
            if tp not in feasible_tps(model, gpu):
                continue
            for phase, (batches, seqs) in REFERENCE_SHAPES.items():
                job = ProfileJob(
                    model, gpu, tp, model.num_layers, phase, model.default_dtype,
                    BackendName.AIC, batches, seqs,
                )  # fmt: skip
                try:
                    result = aic_result(job)
                except ValueError:  # does not fit this GPU
                    continue
                if result.backend != BackendName.AIC:
                    continue
                observations += [
                    Observation(
                        spec=StageSpec(model, gpu, tp, model.num_layers, model.default_dtype),
                        kind=str(phase),
                        batch_size=b,
                        input_tokens=s,
                        output_tokens=0,
                        latency_ms=result.latency_ms[i][j],
                        reference="aic",
                    )
                    for i, b in enumerate(batches)
                    for j, s in enumerate(seqs)
                ]
    return tuple(observations)


def _report(
    family: str, reference: str, observations: Sequence[Observation], eff: Efficiency
) -> ReportRow:
    errors = np.abs(relative_errors(observations, eff, memory_constants()))
    return ReportRow(family, reference, len(errors), float(np.median(errors)), float(errors.max()))


def _default(fits: dict[str, FitResult]) -> Efficiency:
    effs = [f.efficiency for f in fits.values()]
    return Efficiency(
        "default",
        statistics.median(e.mfu for e in effs),
        statistics.median(e.mbu for e in effs),
        statistics.median(e.layer_overhead_us for e in effs),
        statistics.median(e.step_overhead_ms for e in effs),
    )


def calibrate(db_path: Path) -> tuple[dict[str, FitResult], Efficiency, list[ReportRow]]:
    with read_connection(db_path) as con:
        models = {m.model: m for m in queries.models(con)}
        gpus = {g.gpu_type: g for g in queries.gpu_types(con)}
    constants = memory_constants()
    fits: dict[str, FitResult] = {}
    report: list[ReportRow] = []
    for family, names in AIC_FAMILIES.items():
        observations = aic_observations(models, [gpus[n] for n in names])
        fits[family] = fit_efficiency(family, observations, constants)
        report.append(_report(family, "aic", observations, fits[family].efficiency))
        print(family, fits[family], flush=True)
    published = published_observations(published_rows(), models, gpus)
    mi300 = [o for o in published if o.spec.gpu.gpu_type == "MI300X"]
    fits["cdna3"] = fit_efficiency("cdna3", mi300, constants)
    report.append(_report("cdna3", "published", mi300, fits["cdna3"].efficiency))
    h200 = [o for o in published if o.spec.gpu.gpu_type == "H200-SXM"]
    report.append(_report("hopper", "published", h200, fits["hopper"].efficiency))
    return fits, _default(fits), report


def write_results(
    fits: dict[str, FitResult], default: Efficiency, report: Sequence[ReportRow], directory: Path
) -> None:
    sources = {
        "hopper": "fit to AIConfigurator 0.12 vLLM 0.24.0 predictions on h100_sxm + h200_sxm",
        "ampere": "fit to AIConfigurator 0.12 vLLM 0.14.0 predictions on a100_sxm",
        "ada": "fit to AIConfigurator 0.12 vLLM 0.24.0 predictions on l40s",
        "blackwell": "fit to AIConfigurator 0.12 vLLM 0.24.0 predictions on b200_sxm",
        "cdna3": "fit to published_points.csv rows 19-21 (Oracle MI300X vLLM blog)",
    }
    with (directory / "efficiency.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["family", "mfu", "mbu", "layer_overhead_us", "step_overhead_ms",
                         "fit_points", "median_abs_err", "max_abs_err", "source"])  # fmt: skip
        for family, fit in fits.items():
            e = fit.efficiency
            writer.writerow([family, e.mfu, e.mbu, e.layer_overhead_us, e.step_overhead_ms,
                             fit.points, f"{fit.median_abs_err:.4f}", f"{fit.max_abs_err:.4f}",
                             f"python -m profiling.calibrate: {sources[family]}"])  # fmt: skip
        writer.writerow([default.family, default.mfu, default.mbu, default.layer_overhead_us,
                         default.step_overhead_ms, 0, "", "",
                         "median of the fitted families (no reference for this family)"])  # fmt: skip
    with (directory / "fit_report.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["family", "reference", "points", "median_abs_err", "max_abs_err"])
        for row in report:
            writer.writerow([row.family, row.reference, row.points,
                             f"{row.median_abs_err:.4f}", f"{row.max_abs_err:.4f}"])  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--db", type=Path, default=None, help="catalog (default: a fresh one)")
    parser.add_argument("--out", type=Path, default=calibration_dir())
    args = parser.parse_args(argv)
    db = args.db
    if db is None:
        db = Path(tempfile.mkdtemp(prefix="coral-calibrate-")) / "catalog.duckdb"
        init_catalog(db)
    fits, default, report = calibrate(db)
    write_results(fits, default, report, args.out)
    for row in report:
        print(row)


if __name__ == "__main__":
    main()
