"""Reference-data domain values: GPU types, model architectures, rentable instance types.

These are the shapes every other package speaks. Units live in the field names.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    """What a serving instance does: one phase of P/D disaggregation, or both (colocated)."""

    PREFILL = "prefill"
    DECODE = "decode"
    COLOCATED = "colocated"


class Pricing(StrEnum):
    ON_DEMAND = "on_demand"
    SPOT = "spot"


class Dtype(StrEnum):
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def bytes_per_param(self) -> float:
        return 1.0 if self is Dtype.FP8 else 2.0


@dataclass(frozen=True, slots=True)
class GpuType:
    """One accelerator model as a datasheet describes it (dense tensor-core peaks)."""

    gpu_type: str
    vendor: str
    memory_gib: float
    hbm_bandwidth_gbps: float
    bf16_dense_tflops: float | None
    fp8_dense_tflops: float | None
    fp16_dense_tflops: float | None
    intra_node_link: str
    intra_node_bw_gbps: float
    tdp_w: float | None
    gpus_per_machine: int
    verified: bool
    source: str

    def peak_tflops(self, dtype: Dtype) -> float:
        """Dense peak for `dtype`, falling back to the next wider format the GPU supports."""
        order = {
            Dtype.FP8: (self.fp8_dense_tflops, self.bf16_dense_tflops, self.fp16_dense_tflops),
            Dtype.BF16: (self.bf16_dense_tflops, self.fp16_dense_tflops),
            Dtype.FP16: (self.fp16_dense_tflops, self.bf16_dense_tflops),
        }[dtype]
        for value in order:
            if value is not None:
                return value
        raise ValueError(f"GPU {self.gpu_type} has no tensor peak for {dtype}")


@dataclass(frozen=True, slots=True)
class ModelArch:
    """A transformer's shape, as its Hugging Face config.json states it."""

    model: str
    num_layers: int
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    moe_intermediate_size: int | None
    vocab_size: int
    num_experts: int | None
    num_experts_per_tok: int | None
    num_shared_experts: int | None
    first_k_dense_layers: int | None
    attention: str  # "gqa" or "mla"
    kv_lora_rank: int | None
    qk_rope_head_dim: int | None
    max_position_embeddings: int
    total_params_b: float
    active_params_b: float
    default_dtype: Dtype
    verified: bool
    source: str

    @property
    def is_moe(self) -> bool:
        return bool(self.num_experts)


@dataclass(frozen=True, slots=True)
class InstanceType:
    """A machine a cloud rents in one region/zone, with whole-machine prices."""

    cloud: str
    instance_type: str
    region: str
    zone: str
    gpu_type: str
    gpu_count: int
    vcpus: float | None
    memory_gib: float | None
    ondemand_usd_per_hr: float | None
    spot_usd_per_hr: float | None
    source: str


@dataclass(frozen=True, slots=True)
class WorkloadClass:
    """An (input, output) length bucket with the SLOs templates are evaluated against."""

    workload_class: str
    input_tokens: int
    output_tokens: int
    ttft_slo_s: float
    tpot_slo_s: float


@dataclass(frozen=True, slots=True)
class Stage:
    """`tp` GPUs of one type in one machine, holding `num_layers` contiguous layers."""

    gpu_type: str
    tp: int
    num_layers: int


@dataclass(frozen=True, slots=True)
class Template:
    """A complete serving instance of one model for one phase and workload class.

    Prefill/decode templates are rated in tokens/s under the class's TTFT/TPOT SLO;
    colocated ones in requests/s of the class under both SLOs.
    """

    template_id: str
    model: str
    phase: Phase
    workload_class: str
    stages: tuple[Stage, ...]
    throughput_tokens_per_s: float | None
    throughput_req_per_s: float | None
    latency_s: float | None
    max_batch: int | None
    profile_backend: str
    profile_backend_version: str

    @property
    def gpu_vector(self) -> dict[str, int]:
        """GPUs used per GPU type."""
        vector: dict[str, int] = {}
        for stage in self.stages:
            vector[stage.gpu_type] = vector.get(stage.gpu_type, 0) + stage.tp
        return vector

    @property
    def total_gpus(self) -> int:
        return sum(stage.tp for stage in self.stages)

    @property
    def pp_layer_partition(self) -> str:
        """The `VLLM_PP_LAYER_PARTITION` value: layers per stage, in pipeline order."""
        return ",".join(str(stage.num_layers) for stage in self.stages)


@dataclass(frozen=True, slots=True)
class ProfilePoint:
    """One latency point of one stage shape (a row of the `profiles` table).

    Prefill: `seq_len_tokens` is the prompt length per request, latency covers the batch.
    Decode: `seq_len_tokens` is the mean context length, latency is one step of the batch.
    """

    model: str
    gpu_type: str
    tp: int
    num_layers: int
    phase: Phase
    dtype: Dtype
    batch_size: int
    seq_len_tokens: int
    latency_ms: float
    backend: str
    backend_version: str
    weights_gib: float | None = None
    kv_gib_per_token: float | None = None
    max_kv_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class Offer:
    """What one inventory snapshot says can be rented: machines of one instance type in one
    region at one pricing class, with the whole-machine price and how many are available."""

    cloud: str
    region: str
    instance_type: str
    pricing: Pricing
    gpu_type: str
    gpu_count: int
    price_usd_per_hr: float
    available_count: int


@dataclass(frozen=True, slots=True)
class ModelDemand:
    """Demand of one model for the planning window, with its SLOs and priority weight."""

    model: str
    rate_req_per_s: float
    mean_input_tokens: float
    mean_output_tokens: float
    ttft_slo_s: float
    tpot_slo_s: float
    workload_class: str
    priority: float = 1.0
