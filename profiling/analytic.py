"""Roofline performance model of one pipeline stage: pure functions over arrays.

A stage is `tp` GPUs of one type holding `num_layers` contiguous layers of a model. For a
forward step the model sums three kernels groups, each bound by compute or by memory:

- linear layers: FLOPs = 2 x active parameters x tokens; bytes = weights touched (dense weights,
  plus the routed experts the step's tokens hit: E x (1 - (1 - k/E)^tokens) of E experts);
- attention: FLOPs = 2 x heads x (qk_dim + v_dim) per (query, context) token pair (causal
  prefill: S(S+1)/2 pairs per sequence); bytes = KV cache read (decode) or written (prefill);
- lm_head (and embedding lookup): vocab x hidden, on the sequences' last tokens.

time = sum over groups of max(FLOPs / (peak x MFU), bytes / (HBM x MBU))
       + 2 all-reduces per layer (ring, over the machine's link) + per-layer and per-step
       overheads. MFU, MBU and the overheads are calibrated per GPU family (calibration.py).

Every stage row carries the embedding and lm_head (weights and time): a pipeline of S stages
over-counts them S-1 times, a small conservative error that keeps latency linear in layers.
GQA: vLLM requires TP to divide the attention heads; KV heads are split when TP <= KV heads
(TP must divide them) and replicated when TP > KV heads (KV heads must divide TP).
MLA (DeepSeek): the latent KV (kv_lora_rank + rope dims) is cached once per token and
replicated on every TP rank; attention projection weights are the model's parameters not in
MLP/experts/embeddings (the catalog has no q_lora_rank). Sliding-window layers are modelled as
full attention (conservative). Units: bytes, FLOPs, ms unless a name says otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import cache

import numpy as np
from numpy.typing import ArrayLike, NDArray

from planning.domain import Dtype, GpuType, ModelArch

GIB = 2.0**30


class ProfileInputError(ValueError):
    """A profiling input that cannot be modelled; the message names the input."""


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achieved fractions of datasheet peaks and fixed overheads for one GPU family."""

    family: str
    mfu: float  # fraction of dense tensor peak FLOP/s reached by GEMMs / attention
    mbu: float  # fraction of HBM bandwidth reached by weight and KV streaming
    layer_overhead_us: float  # kernel launches and small ops per layer per step
    step_overhead_ms: float  # scheduling, sampling, input preparation per step


@dataclass(frozen=True, slots=True)
class MemoryConstants:
    """Memory and link assumptions (catalog_db/data/calibration/model_constants.csv)."""

    gpu_memory_utilization: float
    runtime_overhead_gib: float
    max_num_batched_tokens: int
    kv_cache_bytes_per_elem: float
    embedding_bytes_per_param: float
    comm_efficiency: float
    inter_node_gbps: float
    pp_handoff_latency_us: float
    allreduce_latency_us: float


@dataclass(frozen=True, slots=True)
class StageSpec:
    model: ModelArch
    gpu: GpuType
    tp: int
    num_layers: int
    dtype: Dtype


@dataclass(frozen=True, slots=True)
class LayerShape:
    """Per-GPU costs of one average layer of a model at one TP degree and dtype."""

    dense_weight_bytes: float  # attention + dense MLP + shared experts + router
    expert_weight_bytes: float  # one routed expert (0 for dense models)
    num_experts: int
    experts_per_tok: int
    moe_layer_fraction: float
    linear_flops_per_token: float
    attn_flops_per_pair: float  # per (query token, context token)
    kv_bytes_per_token: float
    hidden_size: int


@dataclass(frozen=True, slots=True)
class StageMemory:
    """Per-GPU memory of a stage: weights, KV bytes per token, KV-cache capacity."""

    weights_gib: float
    kv_gib_per_token: float
    activation_reserve_gib: float
    max_kv_tokens: int


def validate_stage(model: ModelArch, gpu: GpuType, tp: int, num_layers: int) -> None:
    """Refuse TP and layer counts vLLM cannot run; the error names the bad input."""
    if tp < 1 or tp > gpu.gpus_per_machine:
        raise ProfileInputError(
            f"tp={tp} not in 1..{gpu.gpus_per_machine} (GPUs per machine of {gpu.gpu_type})"
        )
    if model.num_heads % tp:
        raise ProfileInputError(
            f"tp={tp} does not divide num_heads={model.num_heads} of {model.model}"
        )
    kv = model.num_kv_heads
    if model.attention == "gqa" and (kv % tp if tp <= kv else tp % kv):
        raise ProfileInputError(f"tp={tp} and num_kv_heads={kv} of {model.model}: neither divides")
    if not 1 <= num_layers <= model.num_layers:
        raise ProfileInputError(
            f"num_layers={num_layers} not in 1..{model.num_layers} of {model.model}"
        )


def _mlp_params(model: ModelArch) -> tuple[float, float, float, float]:
    """(dense MLP, one routed expert, shared experts + router, MoE layer fraction) params."""
    dense = 3.0 * model.hidden_size * model.intermediate_size  # gated MLP: up, gate, down
    if not model.is_moe:
        return dense, 0.0, 0.0, 0.0
    expert = 3.0 * model.hidden_size * (model.moe_intermediate_size or model.intermediate_size)
    shared = (model.num_shared_experts or 0) * expert + model.hidden_size * (model.num_experts or 0)
    moe_fraction = 1.0 - (model.first_k_dense_layers or 0) / model.num_layers
    return dense, expert, shared, moe_fraction


def attention_params(model: ModelArch) -> float:
    """Attention projection parameters of one layer (whole layer, before TP)."""
    h, heads = model.hidden_size, model.num_heads
    if model.attention == "gqa":
        return float(h * heads * model.head_dim * 2 + 2 * h * model.num_kv_heads * model.head_dim)
    dense, expert, shared, moe_fraction = _mlp_params(model)
    mlp = (1 - moe_fraction) * dense + moe_fraction * ((model.num_experts or 0) * expert + shared)
    residual = model.total_params_b * 1e9 - 2 * model.vocab_size * h - model.num_layers * mlp
    return max(residual / model.num_layers, 0.0)


@cache  # pure in hashable frozen inputs; the analytic grid asks for it ~30,000 times
def layer_shape(model: ModelArch, tp: int, dtype: Dtype, kv_bytes_per_elem: float) -> LayerShape:
    """Per-GPU weight bytes, FLOPs and KV bytes of one average layer."""
    dense, expert, shared, moe_fraction = _mlp_params(model)
    attn = attention_params(model)
    if model.attention == "gqa" and tp > model.num_kv_heads:  # KV projections replicated
        kv_proj = 2 * model.hidden_size * model.num_kv_heads * model.head_dim
        attn_per_gpu = (attn - kv_proj) / tp + kv_proj / model.num_kv_heads
    else:
        attn_per_gpu = attn / tp
    k = model.num_experts_per_tok or 0
    dense_params = attn_per_gpu + ((1 - moe_fraction) * dense + moe_fraction * shared) / tp
    active = dense_params + moe_fraction * k * expert / tp
    if model.attention == "mla":
        rope = model.qk_rope_head_dim or 0
        kv_elems = float((model.kv_lora_rank or 0) + rope)  # latent, replicated per rank
        pair = 2.0 * model.num_heads * (model.head_dim + model.head_dim - rope) / tp
    else:
        kv_elems = 2.0 * max(model.num_kv_heads // tp, 1) * model.head_dim
        pair = 4.0 * model.num_heads * model.head_dim / tp
    return LayerShape(
        dense_weight_bytes=dense_params * dtype.bytes_per_param,
        expert_weight_bytes=expert / tp * dtype.bytes_per_param,
        num_experts=model.num_experts or 0,
        experts_per_tok=k,
        moe_layer_fraction=moe_fraction,
        linear_flops_per_token=2.0 * active,
        attn_flops_per_pair=pair,
        kv_bytes_per_token=kv_elems * kv_bytes_per_elem,
        hidden_size=model.hidden_size,
    )


def layer_weight_bytes(shape: LayerShape) -> float:
    """All weights of one average layer resident on one GPU (every expert)."""
    return shape.dense_weight_bytes + shape.moe_layer_fraction * shape.num_experts * (
        shape.expert_weight_bytes
    )


def embedding_bytes(model: ModelArch, tp: int, constants: MemoryConstants) -> float:
    """Embedding plus lm_head bytes per GPU (vocab-parallel, unquantised)."""
    return 2.0 * model.vocab_size * model.hidden_size / tp * constants.embedding_bytes_per_param


def stage_memory(spec: StageSpec, constants: MemoryConstants) -> StageMemory:
    """Weights, KV bytes per token and KV capacity per GPU at the configured utilisation.

    Activation reserve: a forward over `max_num_batched_tokens` tokens holds roughly
    (4 x hidden + 2 x MLP width / TP) values of 2 bytes per token, plus a fixed runtime
    overhead. Capacity is 0 when weights and reserve do not fit.
    """
    model = spec.model
    shape = layer_shape(model, spec.tp, spec.dtype, constants.kv_cache_bytes_per_elem)
    weights = spec.num_layers * layer_weight_bytes(shape) + embedding_bytes(
        model, spec.tp, constants
    )
    mlp_width = max(model.intermediate_size, model.moe_intermediate_size or 0)
    activation = constants.max_num_batched_tokens * (
        4 * model.hidden_size + 2 * mlp_width / spec.tp
    )
    reserve_gib = activation * 2.0 / GIB + constants.runtime_overhead_gib
    kv_per_token = spec.num_layers * shape.kv_bytes_per_token
    free_gib = spec.gpu.memory_gib * constants.gpu_memory_utilization - weights / GIB - reserve_gib
    return StageMemory(
        weights_gib=weights / GIB,
        kv_gib_per_token=kv_per_token / GIB,
        activation_reserve_gib=reserve_gib,
        max_kv_tokens=max(int(free_gib * GIB // kv_per_token), 0),
    )


def max_decode_batch(memory: StageMemory, context_tokens: int) -> int:
    """Largest decode batch whose KV cache at `context_tokens` fits (0 if none)."""
    return memory.max_kv_tokens // max(context_tokens, 1)


def _experts_touched(shape: LayerShape, tokens: NDArray[np.float64]) -> NDArray[np.float64]:
    """Expected distinct routed experts hit by `tokens` tokens choosing k of E uniformly."""
    if shape.num_experts == 0:
        return np.zeros_like(tokens)
    miss = 1.0 - shape.experts_per_tok / shape.num_experts
    return shape.num_experts * (1.0 - np.power(miss, tokens))


@dataclass(frozen=True, slots=True)
class StepTerms:
    """A forward step's cost before efficiencies: three kernel groups (linear, attention,
    lm_head) as compute time at full peak and memory time at full bandwidth, plus TP comm."""

    compute_ms: NDArray  # shape (3, *n): at MFU = 1
    memory_ms: NDArray  # shape (3, *n): at MBU = 1
    comm_ms: NDArray  # shape n
    num_layers: int | NDArray  # broadcasts with n


def step_ms(terms: StepTerms, eff: Efficiency) -> NDArray:
    """Step latency (ms): per group max(compute / MFU, memory / MBU), plus comm and overheads."""
    groups = np.maximum(terms.compute_ms / eff.mfu, terms.memory_ms / eff.mbu).sum(axis=0)
    overhead = terms.num_layers * eff.layer_overhead_us / 1e3 + eff.step_overhead_ms
    return groups + terms.comm_ms + overhead


def allreduce_ms(nbytes: ArrayLike, tp: int, gpu: GpuType, constants: MemoryConstants) -> NDArray:
    """Ring all-reduce of `nbytes` over `tp` GPUs of the machine's link (0 when tp == 1)."""
    if tp == 1:
        return np.zeros_like(np.asarray(nbytes, dtype=float))
    link = gpu.intra_node_bw_gbps * 1e9 * constants.comm_efficiency
    return (
        2.0 * (tp - 1) / tp * np.asarray(nbytes) / link
    ) * 1e3 + constants.allreduce_latency_us / 1e3


def pp_handoff_ms(tokens: ArrayLike, hidden_size: int, constants: MemoryConstants) -> NDArray:
    """Hand-off of `tokens` bf16 activations to the next pipeline stage on another machine."""
    nbytes = np.asarray(tokens, dtype=float) * hidden_size * 2.0
    return nbytes / (constants.inter_node_gbps * 1e9) * 1e3 + constants.pp_handoff_latency_us / 1e3


def _step_terms(
    spec: StageSpec,
    constants: MemoryConstants,
    tokens: NDArray,
    attn_pairs: NDArray,
    kv_bytes: NDArray,
    sequences: NDArray,
    layers: int | NDArray,
) -> StepTerms:
    """Costs of one forward step over `tokens` tokens (arrays, and `layers`, broadcast
    together: a layers array of shape (k, 1, 1) gives k stages' grids in one evaluation,
    element for element the same arithmetic as k separate calls)."""
    shape = layer_shape(spec.model, spec.tp, spec.dtype, constants.kv_cache_bytes_per_elem)
    tokens, attn_pairs, kv_bytes, sequences, _ = np.broadcast_arrays(
        tokens, attn_pairs, kv_bytes, sequences, np.asarray(layers)
    )
    touched = shape.moe_layer_fraction * shape.expert_weight_bytes * _experts_touched(shape, tokens)
    head_params = spec.model.vocab_size * spec.model.hidden_size / spec.tp
    flops = np.stack(
        [
            layers * shape.linear_flops_per_token * tokens,
            layers * shape.attn_flops_per_pair * attn_pairs,
            2.0 * head_params * sequences,
        ]
    )
    nbytes = np.stack(
        [
            layers * (shape.dense_weight_bytes + touched),
            layers * kv_bytes,
            np.full(tokens.shape, head_params * constants.embedding_bytes_per_param),
        ]
    )
    peak_flops = spec.gpu.peak_tflops(spec.dtype) * 1e12
    bandwidth = spec.gpu.hbm_bandwidth_gbps * 1e9
    comm = 2 * layers * allreduce_ms(tokens * shape.hidden_size * 2.0, spec.tp, spec.gpu, constants)
    return StepTerms(flops / peak_flops * 1e3, nbytes / bandwidth * 1e3, comm, layers)


def prefill_terms(
    spec: StageSpec,
    constants: MemoryConstants,
    batch: ArrayLike,
    prompt_tokens: ArrayLike,
    layers: ArrayLike | None = None,
) -> StepTerms:
    """Prefill step costs; `layers` None: the spec's layers (else an array to broadcast)."""
    b = np.asarray(batch, dtype=float)
    s = np.asarray(prompt_tokens, dtype=float)
    shape = layer_shape(spec.model, spec.tp, spec.dtype, constants.kv_cache_bytes_per_elem)
    tokens = b * s
    return _step_terms(
        spec, constants, tokens, b * s * (s + 1) / 2, tokens * shape.kv_bytes_per_token, b,
        spec.num_layers if layers is None else np.asarray(layers),
    )  # fmt: skip


def decode_terms(
    spec: StageSpec,
    constants: MemoryConstants,
    batch: ArrayLike,
    context_tokens: ArrayLike,
    layers: ArrayLike | None = None,
) -> StepTerms:
    """Decode step costs; `layers` None: the spec's layers (else an array to broadcast)."""
    b = np.asarray(batch, dtype=float)
    c = np.asarray(context_tokens, dtype=float)
    shape = layer_shape(spec.model, spec.tp, spec.dtype, constants.kv_cache_bytes_per_elem)
    return _step_terms(
        spec, constants, b, b * c, b * (c + 1) * shape.kv_bytes_per_token, b,
        spec.num_layers if layers is None else np.asarray(layers),
    )  # fmt: skip


def prefill_latency_ms(
    spec: StageSpec,
    eff: Efficiency,
    constants: MemoryConstants,
    batch: ArrayLike,
    prompt_tokens: ArrayLike,
    layers: ArrayLike | None = None,
) -> NDArray:
    """Latency of prefilling `batch` prompts of `prompt_tokens` each in one step (ms).

    `layers` (optional) overrides the spec's layer count with an array that broadcasts
    against batch and prompt_tokens, to evaluate several stage sizes at once."""
    return step_ms(prefill_terms(spec, constants, batch, prompt_tokens, layers), eff)


def decode_latency_ms(
    spec: StageSpec,
    eff: Efficiency,
    constants: MemoryConstants,
    batch: ArrayLike,
    context_tokens: ArrayLike,
    layers: ArrayLike | None = None,
) -> NDArray:
    """Latency of one decode step of `batch` sequences at mean context `context_tokens` (ms);
    `layers` as in `prefill_latency_ms`."""
    return step_ms(decode_terms(spec, constants, batch, context_tokens, layers), eff)


def layer_options(
    num_layers: int, fractions: tuple[int | Fraction, ...] = (1, 2, 4, 8)
) -> tuple[int, ...]:
    """Layer counts profiled per stage shape: ceil(L / f) for each divisor f (an int or an
    exact Fraction such as 4/3 for 3L/4), distinct, largest first."""
    return tuple(sorted({math.ceil(num_layers / f) for f in fractions}, reverse=True))
