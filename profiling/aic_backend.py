"""The AIConfigurator backend: vLLM latencies predicted from kernels measured on real GPUs.

NVIDIA AIConfigurator (PyPI `aiconfigurator`, Apache-2.0) compiles a model for a system
(`EngineHandle.compile(model_path, system, "vllm", backend_version, tp_size=...)`) and then
answers `predict_prefill_latency(batch, isl)` and `decode_step_latency(batch, ctx, osl)` in
ms; `estimate_kv_cache(...)` gives weights and KV capacity (its latency calls ignore memory).

Catalog names map to its model configs and systems through
catalog_db/data/calibration/aic_names.csv. Stages are compiled from a copy of the packaged
config.json with `num_hidden_layers` (and per-layer lists) truncated, at two anchor layer
counts (L and ceil(L/2)); AIConfigurator sums per-layer ops plus embedding and lm_head, so
other layer counts are the linear interpolation (see `anchor_layers`). This halves the
compiles; AIConfigurator's YAML reads are cached per worker process (profiling.aic_yaml),
as are compiled engines, memory estimates and grids (functools.cache, keyed by target).
Only the model's default dtype is covered (AIConfigurator then reads the checkpoint's own
quantisation). When a compile or prediction fails the job falls back to the analytic backend
and the result's note says why.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import metadata, resources
from pathlib import Path
from typing import Any

import numpy as np

from planning.domain import Dtype, GpuType, ModelArch, Phase
from profiling import aic_yaml
from profiling.analytic_backend import analytic_result, checked_memory, spec_of
from profiling.base_backend import BackendName, JobResult, ProfileJob
from profiling.calibration import calibration_dir, memory_constants

GIB = 2.0**30
KV_ESTIMATE_MAX_BATCH = 512  # largest decode batch of the default grid


@dataclass(frozen=True, slots=True)
class AicNames:
    models: dict[str, str]  # catalog model -> AIConfigurator model config id
    systems: dict[str, tuple[str, str]]  # catalog GPU -> (system, vLLM data version)


@cache
def aic_names(directory: Path | None = None) -> AicNames:
    path = (directory or calibration_dir()) / "aic_names.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return AicNames(
        models={r["catalog_name"]: r["aic_name"] for r in rows if r["kind"] == "model"},
        systems={
            r["catalog_name"]: (r["aic_name"], r["aic_data_version"])
            for r in rows
            if r["kind"] == "gpu"
        },
    )


@cache
def aic_package_version() -> str:
    return metadata.version("aiconfigurator_core")


def aic_version(gpu_type: str) -> str:
    """e.g. 'aic-0.12.0+vllm-0.24.0': package version + the system's vLLM data version."""
    _, data_version = aic_names().systems[gpu_type]
    return f"aic-{aic_package_version()}+vllm-{data_version}"


@cache
def _config_dir(aic_model: str, num_layers: int) -> str:
    """A local model directory: the packaged config.json truncated to `num_layers` layers."""
    packaged = resources.files("aiconfigurator_core").joinpath("model_configs")
    stem = aic_model.replace("/", "--")
    config: dict[str, Any] = json.loads(packaged.joinpath(f"{stem}_config.json").read_text())
    total = config["num_hidden_layers"]
    for key, value in list(config.items()):
        if isinstance(value, list) and len(value) == total:  # per-layer lists (layer_types)
            config[key] = value[:num_layers]
    config["num_hidden_layers"] = num_layers
    directory = Path(tempfile.mkdtemp(prefix=f"coral-aic-{stem}-{num_layers}-"))
    (directory / "config.json").write_text(json.dumps(config))
    quant = packaged.joinpath(f"{stem}_hf_quant_config.json")
    if quant.is_file():
        (directory / "hf_quant_config.json").write_text(quant.read_text())
    return str(directory)


@dataclass(frozen=True, slots=True)
class _Target:
    """What AIConfigurator is asked about: model config, system, data version, TP, MoE."""

    aic_model: str
    system: str
    version: str
    tp: int
    moe: bool

    @property
    def parallel(self) -> dict[str, int]:
        # vLLM without expert parallelism shards every expert over the TP group.
        tp = self.tp
        return {"tp_size": tp, "moe_tp_size": tp, "moe_ep_size": 1} if self.moe else {"tp_size": tp}


@cache
def _engine(target: _Target, num_layers: int) -> Any:
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    from aiconfigurator_core.sdk.engine import EngineHandle

    aic_yaml.install()

    path = _config_dir(target.aic_model, num_layers)
    return EngineHandle.compile(
        path, target.system, "vllm", backend_version=target.version, **target.parallel
    )


_CAPACITY_OVERRIDE_BYTES = 1 << 44  # 16 TiB: lets the estimate run for stages that don't fit


@cache
def _memory(target: _Target, num_layers: int) -> tuple[float, float, float]:
    """(weights bytes, KV bytes per token, non-KV bytes) per GPU from AIConfigurator.

    Estimated against an oversized capacity, so that anchor stages too big for the GPU still
    give their (linear in layers) weights and reserve; the caller applies the real capacity.
    """
    from aiconfigurator_core.sdk.memory import estimate_kv_cache

    aic_yaml.install()
    utilization = memory_constants().gpu_memory_utilization
    estimate = estimate_kv_cache(
        _config_dir(target.aic_model, num_layers),
        target.system,
        "vllm",
        target.version,
        max_num_tokens=memory_constants().max_num_batched_tokens,
        max_batch_size=KV_ESTIMATE_MAX_BATCH,
        memory_fraction_kind="of_total",
        memory_fraction_value=utilization,
        gpu_memory_capacity_bytes_override=_CAPACITY_OVERRIDE_BYTES,
        **target.parallel,
    )
    non_kv = _CAPACITY_OVERRIDE_BYTES * utilization - float(estimate["total_kv_size_bytes"])
    return (
        float(estimate["memory_breakdown"]["weights_bytes"]),
        float(estimate["kv_size_per_token_bytes"]),
        non_kv,
    )


@cache
def _grid(target: _Target, num_layers: int, phase: Phase, batches: tuple[int, ...],
          seqs: tuple[int, ...]) -> np.ndarray:  # fmt: skip
    engine = _engine(target, num_layers)
    if phase == Phase.PREFILL:
        rows = [[engine.predict_prefill_latency(b, s) for s in seqs] for b in batches]
    else:
        rows = [[engine.decode_step_latency(b, s, 2) for s in seqs] for b in batches]
    return np.asarray(rows, dtype=float)


def anchor_layers(total_layers: int) -> tuple[int, int]:
    """The two layer counts AIConfigurator is compiled for; others are interpolated.

    Its latency and memory are sums over per-layer ops plus embedding/lm_head, so they are
    linear in layers (exact for dense models; MoE models with a few leading dense layers are
    linear above them; alternating sliding/full attention layers are averaged).
    """
    return total_layers, math.ceil(total_layers / 2)


def _linear(values: tuple[Any, Any], anchors: tuple[int, int], layers: int) -> Any:
    high, low = anchors
    weight = (layers - low) / (high - low)
    return values[1] + (values[0] - values[1]) * weight


def _aic_numbers(job: ProfileJob, target: _Target) -> tuple[np.ndarray, tuple[float, float, int]]:
    anchors = anchor_layers(job.model.num_layers)
    grids = tuple(_grid(target, n, job.phase, job.batch_sizes, job.seq_lens) for n in anchors)
    memories = tuple(_memory(target, n) for n in anchors)
    latency = _linear(grids, anchors, job.num_layers)
    weights, per_token, non_kv = (
        _linear((memories[0][i], memories[1][i]), anchors, job.num_layers) for i in range(3)
    )
    pool = job.gpu.memory_gib * GIB * memory_constants().gpu_memory_utilization - non_kv
    memory = (weights / GIB, per_token / GIB, max(int(pool // per_token), 0))
    return latency, memory


def aic_result(job: ProfileJob) -> JobResult:
    """AIConfigurator's grid for the job, or the analytic grid with the failure as note."""
    checked_memory(spec_of(job))  # bad inputs fail the same way under every backend
    names = aic_names()
    system, version = names.systems[job.gpu.gpu_type]
    target = _Target(names.models[job.model.model], system, version, job.tp, job.model.is_moe)
    try:
        latency, (weights, per_token, capacity) = _aic_numbers(job, target)
    except Exception as error:  # AIConfigurator raises many types; record and fall back
        return analytic_result(job, note=f"aic failed: {type(error).__name__}: {error}"[:300])
    if not np.all(latency > 0):
        return analytic_result(job, note="aic returned a non-positive latency")
    rows = tuple(tuple(float(v) for v in row) for row in latency)
    version_label = aic_version(job.gpu.gpu_type)
    return JobResult(job, str(BackendName.AIC), version_label, rows, weights, per_token, capacity)


@dataclass(frozen=True, slots=True)
class AicBackend:
    name: BackendName = BackendName.AIC

    def covers(self, model: ModelArch, gpu: GpuType, dtype: Dtype) -> bool:
        names = aic_names()
        return (
            model.model in names.models
            and gpu.gpu_type in names.systems
            and dtype == model.default_dtype
        )

    def expected_version(self, job: ProfileJob) -> str | None:
        return aic_version(job.gpu.gpu_type)

    def run(self, job: ProfileJob) -> JobResult:
        if not self.covers(job.model, job.gpu, job.dtype):
            raise ValueError(
                f"aic does not cover model {job.model.model!r} on GPU {job.gpu.gpu_type!r} "
                f"in {job.dtype}; use --backend auto or analytic"
            )
        return aic_result(job)
