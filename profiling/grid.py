"""The profiling job grid, as a pure function of models, GPU types and shapes.

model x GPU type x feasible TP x layers held x phase x dtype, each job a FULL product of
batch sizes x sequence lengths (planning.perf_table.build_tables refuses holes).

- TP: 1, 2, 4, 8, at most the GPU type's GPUs per machine, following vLLM's rule (TP divides
  the attention heads; KV heads split when TP <= KV heads, replicated when TP > KV heads).
- Layers held: L, ceil(3L/4), ceil(L/2), ceil(L/4), ceil(L/8), so templates can interpolate a
  pipeline stage's latency linearly in layers, and a stage of a big model can hold more than
  half of it (3L/4 added for the templates' pipeline splits).
- Decode contexts reach 16384: the "long" workload class needs a mean context of
  8192 + 512/2 = 8448 and a final length of 8704, above the former top of 8192. Prefill
  batches reach 32, so prefill throughput of short prompts is not capped at batch 16.
- A stage whose weights and activation reserve leave no KV cache (analytic memory model) is
  skipped: no row could ever be used. Every other stage gets the whole rectangle — a shape
  whose KV cache does not fit is still timed; `max_kv_tokens` on the row says what fits.
- Sequence lengths above the model's max_position_embeddings are dropped (for every batch).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from planning.domain import Dtype, GpuType, ModelArch, Phase
from profiling.analytic import (
    ProfileInputError,
    StageSpec,
    layer_options,
    stage_memory,
    validate_stage,
)
from profiling.backends import resolve_backend
from profiling.base_backend import BackendName, ProfileJob
from profiling.calibration import memory_constants

TP_CANDIDATES = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class Shapes:
    """Grid axes. Prefill: prompt lengths; decode: mean context lengths."""

    prefill_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    prefill_seq_lens: tuple[int, ...] = (128, 256, 512, 1024, 2048, 4096, 8192)
    decode_batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
    decode_seq_lens: tuple[int, ...] = (128, 512, 1024, 2048, 4096, 8192, 16384)
    # divisors f: a stage holds ceil(L / f) layers; Fraction(4, 3) gives ceil(3L/4) exactly
    layer_fractions: tuple[int | Fraction, ...] = (1, Fraction(4, 3), 2, 4, 8)

    def axes(self, phase: Phase, model: ModelArch) -> tuple[tuple[int, ...], tuple[int, ...]]:
        batches, seqs = (
            (self.prefill_batch_sizes, self.prefill_seq_lens)
            if phase == Phase.PREFILL
            else (self.decode_batch_sizes, self.decode_seq_lens)
        )
        return batches, tuple(s for s in seqs if s <= model.max_position_embeddings)


def feasible_tps(model: ModelArch, gpu: GpuType) -> tuple[int, ...]:
    """TP degrees vLLM can run for `model` inside one machine of `gpu`."""
    feasible = []
    for tp in TP_CANDIDATES:
        try:
            validate_stage(model, gpu, tp, model.num_layers)
        except ProfileInputError:
            continue
        feasible.append(tp)
    return tuple(feasible)


def _stage_fits(spec: StageSpec) -> bool:
    return stage_memory(spec, memory_constants()).max_kv_tokens > 0


def stage_jobs(
    model: ModelArch,
    gpu: GpuType,
    backend: BackendName,
    shapes: Shapes,
    dtype: Dtype,
    tps: Sequence[int] | None = None,
) -> list[ProfileJob]:
    """Jobs of one (model, GPU, dtype); explicit `tps` are validated (errors name them)."""
    if tps is None:
        tps = feasible_tps(model, gpu)
    else:
        for tp in tps:
            validate_stage(model, gpu, tp, model.num_layers)
    concrete = resolve_backend(backend, model, gpu, dtype)
    jobs = []
    for tp in tps:
        for layers in layer_options(model.num_layers, shapes.layer_fractions):
            if not _stage_fits(StageSpec(model, gpu, tp, layers, dtype)):
                continue
            for phase in (Phase.PREFILL, Phase.DECODE):
                batches, seqs = shapes.axes(phase, model)
                jobs.append(
                    ProfileJob(model, gpu, tp, layers, phase, dtype, concrete, batches, seqs)
                )
    return jobs


def build_jobs(
    models: Sequence[ModelArch],
    gpus: Sequence[GpuType],
    backend: BackendName = BackendName.AUTO,
    shapes: Shapes | None = None,
    dtypes: Sequence[Dtype] | None = None,
    tps: Sequence[int] | None = None,
) -> tuple[ProfileJob, ...]:
    """Every job of the grid, in a stable order. `dtypes` None: each model's default dtype."""
    shapes = shapes or Shapes()
    jobs: list[ProfileJob] = []
    for model in models:
        for gpu in gpus:
            for dtype in dtypes or (model.default_dtype,):
                jobs += stage_jobs(model, gpu, backend, shapes, Dtype(dtype), tps)
    return tuple(jobs)


def chunk_jobs(jobs: Sequence[ProfileJob]) -> list[tuple[ProfileJob, ...]]:
    """Group jobs into Dask tasks, the long ones first.

    AIConfigurator: one task per GPU type, because a worker process pays seconds per system
    it touches (kernel-data load and attention-lane probes, cached in that process), so each
    system is loaded by one worker only. Analytic and vLLM: one task per (model, GPU).
    AIConfigurator tasks (~10 s each) are submitted first and the analytic ones (~20 ms
    each) fill in behind them, so both workers stay busy to the end (longest first).
    """
    chunks: dict[tuple[str, str, str], list[ProfileJob]] = {}
    for job in jobs:
        model = "" if job.backend is BackendName.AIC else job.model.model
        chunks.setdefault((model, job.gpu.gpu_type, job.backend), []).append(job)
    ordered = sorted(chunks.values(), key=lambda c: c[0].backend is not BackendName.AIC)
    return [tuple(chunk) for chunk in ordered]
