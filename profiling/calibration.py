"""Calibrated constants of the analytic model: loading them, fitting them, measuring their error.

Data (catalog_db/data/calibration/, each row with its source):
  efficiency.csv       MFU, MBU and overheads per GPU family, with the fit's error
  gpu_families.csv     catalog GPU type -> family
  model_constants.csv  memory and link assumptions
  published_points.csv published real-hardware figures (published_perf_calibration.md)
  fit_report.csv       error of the stored constants against each reference set

A reference is an `Observation`: a latency (ms) of one stage for a prefill step, a decode step,
or a whole static-batch request (prefill + output_tokens - 1 decode steps, as vLLM's
`bench latency` and TensorRT-LLM's launch blog measure). Fitting is a grid search over
(MFU, MBU, layer overhead, step overhead) minimising the mean |log(predicted / observed)|.
`python -m profiling.calibration` refits against AIConfigurator and the published rows and
rewrites efficiency.csv and fit_report.csv.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import numpy as np

from planning.domain import Dtype, GpuType, ModelArch, Phase
from profiling.analytic import (
    Efficiency,
    MemoryConstants,
    ProfileInputError,
    StageSpec,
    StepTerms,
    decode_terms,
    prefill_terms,
    step_ms,
)

REQUEST = "request"  # Observation.kind of a whole static-batch request


def calibration_dir() -> Path:
    return Path(str(resources.files("catalog_db").joinpath("data", "calibration")))


def _rows(name: str, directory: Path | None = None) -> list[dict[str, str]]:
    path = (directory or calibration_dir()) / name
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@cache
def memory_constants(directory: Path | None = None) -> MemoryConstants:
    values = {row["name"]: float(row["value"]) for row in _rows("model_constants.csv", directory)}
    fields = MemoryConstants.__dataclass_fields__
    missing = [name for name in fields if name not in values]
    if missing:
        raise ValueError(f"model_constants.csv lacks {missing[0]!r}")
    values["max_num_batched_tokens"] = int(values["max_num_batched_tokens"])
    return MemoryConstants(**{name: values[name] for name in fields})  # type: ignore[arg-type]


@cache
def efficiencies(directory: Path | None = None) -> dict[str, Efficiency]:
    """Efficiency per GPU family (the 'default' row serves families without references)."""
    return {
        row["family"]: Efficiency(
            family=row["family"],
            mfu=float(row["mfu"]),
            mbu=float(row["mbu"]),
            layer_overhead_us=float(row["layer_overhead_us"]),
            step_overhead_ms=float(row["step_overhead_ms"]),
        )
        for row in _rows("efficiency.csv", directory)
    }


@cache
def gpu_families(directory: Path | None = None) -> dict[str, str]:
    return {row["gpu_type"]: row["family"] for row in _rows("gpu_families.csv", directory)}


def efficiency_for(gpu_type: str, directory: Path | None = None) -> Efficiency:
    """The calibrated efficiency of `gpu_type`'s family, or the 'default' family's."""
    family = gpu_families(directory).get(gpu_type)
    if family is None:
        raise ProfileInputError(f"GPU type {gpu_type!r} has no family in gpu_families.csv")
    table = efficiencies(directory)
    return table.get(family, table["default"])


@cache
def constants_digest(directory: Path | None = None) -> str:
    """Short hash of the calibration files: part of the analytic backend's version."""
    digest = hashlib.sha256()
    for name in ("efficiency.csv", "gpu_families.csv", "model_constants.csv"):
        digest.update(((directory or calibration_dir()) / name).read_bytes())
    return digest.hexdigest()[:10]


@dataclass(frozen=True, slots=True)
class Observation:
    """A reference latency of one stage: prefill/decode step, or a whole request (ms)."""

    spec: StageSpec
    kind: str  # "prefill" | "decode" | "request"
    batch_size: int
    input_tokens: int
    output_tokens: int  # requests only
    latency_ms: float
    reference: str  # "aic" or "published:<row>"


def _observation_steps(
    obs: Observation, constants: MemoryConstants
) -> list[tuple[StepTerms, float]]:
    """The forward steps an observation consists of, each with its repeat count."""
    if obs.kind == Phase.PREFILL:
        return [(prefill_terms(obs.spec, constants, obs.batch_size, obs.input_tokens), 1.0)]
    if obs.kind == Phase.DECODE:
        return [(decode_terms(obs.spec, constants, obs.batch_size, obs.input_tokens), 1.0)]
    context = obs.input_tokens + obs.output_tokens / 2
    return [
        (prefill_terms(obs.spec, constants, obs.batch_size, obs.input_tokens), 1.0),
        (decode_terms(obs.spec, constants, obs.batch_size, context), obs.output_tokens - 1.0),
    ]


def predict_ms(obs: Observation, eff: Efficiency, constants: MemoryConstants) -> float:
    """The analytic model's latency for one observation (ms)."""
    return float(
        sum(
            float(step_ms(terms, eff)) * count
            for terms, count in _observation_steps(obs, constants)
        )
    )


def relative_errors(
    observations: Sequence[Observation], eff: Efficiency, constants: MemoryConstants
) -> np.ndarray:
    """(predicted - observed) / observed for each observation."""
    predicted = np.array([predict_ms(o, eff, constants) for o in observations])
    observed = np.array([o.latency_ms for o in observations])
    return (predicted - observed) / observed


@dataclass(frozen=True, slots=True)
class FitResult:
    efficiency: Efficiency
    points: int
    median_abs_err: float
    max_abs_err: float


@dataclass(frozen=True, slots=True)
class SearchGrid:
    mfu: tuple[float, ...] = tuple(float(x) for x in np.round(np.arange(0.2, 0.951, 0.025), 3))
    mbu: tuple[float, ...] = tuple(float(x) for x in np.round(np.arange(0.4, 0.951, 0.025), 3))
    layer_overhead_us: tuple[float, ...] = (0.0, 5.0, 10.0, 20.0, 30.0, 40.0, 60.0, 80.0)
    step_overhead_ms: tuple[float, ...] = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0)


@dataclass(frozen=True, slots=True)
class _StepMatrix:
    """All observations' steps stacked: terms (3, R), repeat counts, owning observation."""

    compute_ms: np.ndarray
    memory_ms: np.ndarray
    fixed_ms: np.ndarray  # comm
    layers: np.ndarray
    counts: np.ndarray
    owner: np.ndarray


def _step_matrix(observations: Sequence[Observation], constants: MemoryConstants) -> _StepMatrix:
    parts = [
        (terms, count, index)
        for index, obs in enumerate(observations)
        for terms, count in _observation_steps(obs, constants)
    ]
    return _StepMatrix(
        compute_ms=np.concatenate([t.compute_ms.reshape(3, 1) for t, _, _ in parts], axis=1),
        memory_ms=np.concatenate([t.memory_ms.reshape(3, 1) for t, _, _ in parts], axis=1),
        fixed_ms=np.array([float(t.comm_ms) for t, _, _ in parts]),
        layers=np.array([float(t.num_layers) for t, _, _ in parts]),
        counts=np.array([c for _, c, _ in parts]),
        owner=np.array([i for _, _, i in parts]),
    )


def _losses(matrix: _StepMatrix, candidates: np.ndarray, observed_log: np.ndarray) -> np.ndarray:
    """Mean |log error| of each candidate row (mfu, mbu, layer_us, step_ms)."""
    mfu, mbu, layer_us, step = (candidates[:, i, None, None] for i in range(4))
    groups = np.maximum(matrix.compute_ms[None] / mfu, matrix.memory_ms[None] / mbu).sum(axis=1)
    steps = groups + matrix.fixed_ms + matrix.layers * layer_us[:, 0] / 1e3 + step[:, 0]
    weighted = steps * matrix.counts
    starts = np.flatnonzero(np.r_[True, matrix.owner[1:] != matrix.owner[:-1]])
    predicted = np.add.reduceat(weighted, starts, axis=1)  # owners are contiguous, in order
    return np.mean(np.abs(np.log(predicted) - observed_log), axis=1)


def fit_efficiency(
    family: str,
    observations: Sequence[Observation],
    constants: MemoryConstants,
    grid: SearchGrid | None = None,
) -> FitResult:
    """The grid point minimising mean |log(pred / obs)| over `observations`."""
    if not observations:
        raise ValueError(f"no observations to fit family {family!r}")
    grid = grid or SearchGrid()
    matrix = _step_matrix(observations, constants)
    observed_log = np.log([o.latency_ms for o in observations])
    candidates = np.array(
        list(itertools.product(grid.mfu, grid.mbu, grid.layer_overhead_us, grid.step_overhead_ms))
    )
    losses = np.concatenate(
        [
            _losses(matrix, candidates[start : start + 256], observed_log)
            for start in range(0, len(candidates), 256)
        ]
    )
    mfu, mbu, layer_us, step = (float(v) for v in candidates[int(np.argmin(losses))])
    eff = Efficiency(family, mfu, mbu, layer_us, step)
    errors = np.abs(relative_errors(observations, eff, constants))
    return FitResult(eff, len(observations), float(np.median(errors)), float(errors.max()))


@dataclass(frozen=True, slots=True)
class PublishedRow:
    row: str
    model: str
    gpu_type: str
    tp: int
    dtype: str
    batch_size: int
    input_tokens: int
    output_tokens: int
    metric: str  # output_tokens_per_s | avg_latency_s
    value: float
    source: str

    def latency_ms(self) -> float:
        """The row as the latency of one static batch (ms)."""
        if self.metric == "avg_latency_s":
            return self.value * 1e3
        if self.metric == "output_tokens_per_s":
            return self.batch_size * self.output_tokens / self.value * 1e3
        raise ValueError(f"published row {self.row}: unknown metric {self.metric!r}")


def published_rows(directory: Path | None = None) -> tuple[PublishedRow, ...]:
    return tuple(
        PublishedRow(
            row=r["row"],
            model=r["model"],
            gpu_type=r["gpu_type"],
            tp=int(r["tp"]),
            dtype=r["dtype"],
            batch_size=int(r["batch_size"]),
            input_tokens=int(r["input_tokens"]),
            output_tokens=int(r["output_tokens"]),
            metric=r["metric"],
            value=float(r["value"]),
            source=r["source"],
        )
        for r in _rows("published_points.csv", directory)
    )


def published_observations(
    rows: Sequence[PublishedRow], models: dict[str, ModelArch], gpus: dict[str, GpuType]
) -> tuple[Observation, ...]:
    """Published rows as whole-request observations of full-model stages."""
    return tuple(
        Observation(
            spec=StageSpec(
                models[r.model], gpus[r.gpu_type], r.tp, models[r.model].num_layers, Dtype(r.dtype)
            ),
            kind=REQUEST,
            batch_size=r.batch_size,
            input_tokens=r.input_tokens,
            output_tokens=r.output_tokens,
            latency_ms=r.latency_ms(),
            reference=f"published:{r.row}",
        )
        for r in rows
    )


@dataclass(frozen=True, slots=True)
class ReportRow:
    """Error of the stored constants of one family against one reference set."""

    family: str
    reference: str  # aic | published
    points: int
    median_abs_err: float
    max_abs_err: float


def fit_report(directory: Path | None = None) -> tuple[ReportRow, ...]:
    return tuple(
        ReportRow(
            r["family"],
            r["reference"],
            int(r["points"]),
            float(r["median_abs_err"]),
            float(r["max_abs_err"]),
        )
        for r in _rows("fit_report.csv", directory)
    )
