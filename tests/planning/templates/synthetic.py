"""Synthetic profiles for template tests: a small roofline, exact enough to reason about.

Per layer, a dense transformer has P = 12 h^2 parameters and caches 2 x kv_heads x head_dim
values per token; a stage of n layers on `tp` GPUs reads n P 2 / tp bytes of weights per step
and does 2 n P / tp FLOPs per token. Latency = max(compute, memory) + a fixed step overhead,
so it is linear in layers with a positive intercept, like the real profiles.
"""

from __future__ import annotations

import math

from planning.domain import Dtype, GpuType, ModelArch, Phase, ProfilePoint, WorkloadClass

GIB = 2.0**30
PREFILL_BATCHES = (1, 2, 4, 8, 16, 32)
PREFILL_SEQS = (256, 512, 1024, 2048, 4096)
DECODE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
DECODE_SEQS = (256, 512, 1024, 2048, 4096, 8192)


def arch(name: str, layers: int, hidden: int, kv_heads: int = 8) -> ModelArch:
    params_b = (12 * hidden * hidden * layers + 2 * 32000 * hidden) / 1e9
    return ModelArch(
        model=name,
        num_layers=layers,
        hidden_size=hidden,
        num_heads=hidden // 128,
        num_kv_heads=kv_heads,
        head_dim=128,
        intermediate_size=4 * hidden,
        moe_intermediate_size=None,
        vocab_size=32000,
        num_experts=None,
        num_experts_per_tok=None,
        num_shared_experts=None,
        first_k_dense_layers=None,
        attention="gqa",
        kv_lora_rank=None,
        qk_rope_head_dim=None,
        max_position_embeddings=32768,
        total_params_b=params_b,
        active_params_b=params_b,
        default_dtype=Dtype.BF16,
        verified=False,
        source="synthetic test model",
    )


def gpu(name: str, memory_gib: float, bw_gbps: float, tflops: float, per_machine: int) -> GpuType:
    return GpuType(
        gpu_type=name,
        vendor="test",
        memory_gib=memory_gib,
        hbm_bandwidth_gbps=bw_gbps,
        bf16_dense_tflops=tflops,
        fp8_dense_tflops=None,
        fp16_dense_tflops=tflops,
        intra_node_link="test",
        intra_node_bw_gbps=100.0,
        tdp_w=None,
        gpus_per_machine=per_machine,
        verified=False,
        source="synthetic test GPU",
    )


CHAT = WorkloadClass("chat", 1024, 256, 1.0, 0.05)
CODE = WorkloadClass("code", 2048, 32, 1.0, 0.05)


def layer_counts(layers: int) -> tuple[int, ...]:
    return tuple(sorted({math.ceil(layers / f) for f in (1, 2, 4, 8)}))


def _memory(m: ModelArch, g: GpuType, tp: int, n: int) -> tuple[float, float, int]:
    layer_bytes = 12 * m.hidden_size**2 * 2 / tp
    weights = (n * layer_bytes + 2 * m.vocab_size * m.hidden_size * 2 / tp) / GIB
    kv = n * 2 * max(m.num_kv_heads // tp, 1) * m.head_dim * 2 / GIB
    free = g.memory_gib * 0.9 - 1.0 - weights
    return weights, kv, max(int(free / kv), 0)


def latency_ms(
    m: ModelArch, g: GpuType, tp: int, n: int, phase: Phase, batch: int, seq: int
) -> float:
    layer_params = 12 * m.hidden_size**2 / tp
    flops_s = (g.bf16_dense_tflops or 1.0) * 1e12 * 0.5
    bytes_s = g.hbm_bandwidth_gbps * 1e9 * 0.7
    kv_bytes = 2 * max(m.num_kv_heads // tp, 1) * m.head_dim * 2
    if phase is Phase.PREFILL:
        tokens = batch * seq
        compute = 2 * layer_params * tokens / flops_s
        memory = 2 * layer_params / bytes_s
    else:
        compute = 2 * layer_params * batch / flops_s
        memory = (2 * layer_params + batch * seq * kv_bytes) / bytes_s
    comm = 0.0 if tp == 1 else 2e-5 * (1 + (batch * (seq if phase is Phase.PREFILL else 1)) / 4096)
    return 1e3 * n * (max(compute, memory) + comm) + 2.0 + 0.1 * tp


def profile_points(
    models: list[ModelArch], gpus: list[GpuType], backend: str = "synthetic"
) -> list[ProfilePoint]:
    points = []
    for m in models:
        for g in gpus:
            for tp in (1, 2, 4, 8):
                if tp > g.gpus_per_machine:
                    continue
                for n in layer_counts(m.num_layers):
                    weights, kv, max_kv = _memory(m, g, tp, n)
                    for phase, batches, seqs in (
                        (Phase.PREFILL, PREFILL_BATCHES, PREFILL_SEQS),
                        (Phase.DECODE, DECODE_BATCHES, DECODE_SEQS),
                    ):
                        for b in batches:
                            for s in seqs:
                                lat = latency_ms(m, g, tp, n, phase, b, s)
                                points.append(
                                    ProfilePoint(
                                        m.model, g.gpu_type, tp, n, phase, Dtype.BF16, b, s,
                                        lat, backend, "1", weights, kv, max_kv,
                                    )
                                )  # fmt: skip
    return points


# A small world: two models, four GPU types; small machines so that pipelines are needed.
SMALL = arch("test/small-8b", 32, 4096)
LARGE = arch("test/large-70b", 80, 8192)
BIG_GPU = gpu("BIG", 80, 3350, 989, 4)
MID_GPU = gpu("MID", 48, 864, 362, 2)
SMALL_GPU = gpu("SMALL", 24, 300, 121, 2)
OLD_GPU = gpu("OLD", 16, 320, 65, 1)
WORLD_MODELS = [SMALL, LARGE]
WORLD_GPUS = [BIG_GPU, MID_GPU, SMALL_GPU, OLD_GPU]
