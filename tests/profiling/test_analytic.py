"""Laws of the analytic roofline model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planning.domain import Dtype
from profiling.analytic import (
    ProfileInputError,
    StageSpec,
    attention_params,
    decode_latency_ms,
    decode_terms,
    embedding_bytes,
    layer_options,
    layer_shape,
    layer_weight_bytes,
    max_decode_batch,
    prefill_latency_ms,
    stage_memory,
    validate_stage,
)
from profiling.analytic_backend import checked_memory
from profiling.calibration import efficiency_for, memory_constants

LLAMA8 = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA70 = "meta-llama/Llama-3.1-70B-Instruct"
SEQS = np.array([128, 256, 512, 1024, 2048, 4096, 8192], dtype=float)
BATCHES = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], dtype=float)


def spec(models, gpus, model=LLAMA8, gpu="H100-SXM", tp=1, layers=None, dtype=Dtype.BF16):
    arch = models[model]
    return StageSpec(arch, gpus[gpu], tp, layers or arch.num_layers, dtype)


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_latency_is_monotone_in_tokens_and_batch(models, gpus, data) -> None:
    model = data.draw(st.sampled_from(sorted(models)))
    gpu = data.draw(st.sampled_from(sorted(gpus)))
    arch = models[model]
    tp = data.draw(st.sampled_from([t for t in (1, 2, 4, 8) if arch.num_heads % t == 0]))
    if tp > gpus[gpu].gpus_per_machine:
        tp = 1
    s = StageSpec(arch, gpus[gpu], tp, arch.num_layers, arch.default_dtype)
    eff, constants = efficiency_for(gpu), memory_constants()
    for fn in (prefill_latency_ms, decode_latency_ms):
        grid = fn(s, eff, constants, BATCHES[:, None], SEQS[None, :])
        assert np.all(np.diff(grid, axis=0) > 0), f"{fn.__name__} not increasing in batch"
        assert np.all(np.diff(grid, axis=1) > 0), f"{fn.__name__} not increasing in tokens"


def test_llama_70b_bf16_needs_two_80gb_gpus(models, gpus) -> None:
    one = spec(models, gpus, LLAMA70, tp=1)
    two = spec(models, gpus, LLAMA70, tp=2)
    assert stage_memory(one, memory_constants()).max_kv_tokens == 0
    assert stage_memory(two, memory_constants()).max_kv_tokens > 0
    with pytest.raises(ProfileInputError, match=r"tp=1 does not fit H100-SXM"):
        checked_memory(one)
    # 70.55e9 params x 2 bytes = 131 GiB of weights: more than 80 GiB, less than 2 x 72 GiB.
    assert stage_memory(one, memory_constants()).weights_gib > gpus["H100-SXM"].memory_gib


def test_8b_decode_at_batch_1_is_memory_bound_near_weights_over_bandwidth(models, gpus) -> None:
    s = spec(models, gpus)
    constants = memory_constants()
    terms = decode_terms(s, constants, 1, 1024)
    assert np.all(terms.memory_ms > terms.compute_ms)  # every kernel group memory-bound
    weights_bytes = stage_memory(s, constants).weights_gib * 2**30
    floor_ms = weights_bytes / (gpus["H100-SXM"].hbm_bandwidth_gbps * 1e9) * 1e3
    latency = float(decode_latency_ms(s, efficiency_for("H100-SXM"), constants, 1, 1024))
    assert floor_ms < latency < 1.6 * floor_ms  # weights / bandwidth, plus overheads


def test_fp8_halves_weight_bytes(models) -> None:
    for name in (LLAMA8, "Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V3"):
        bf16 = layer_shape(models[name], 1, Dtype.BF16, 2.0)
        fp8 = layer_shape(models[name], 1, Dtype.FP8, 2.0)
        assert layer_weight_bytes(fp8) == pytest.approx(layer_weight_bytes(bf16) / 2)


def test_parameter_counts_match_the_catalog(models) -> None:
    for arch in models.values():
        shape = layer_shape(arch, 1, Dtype.BF16, 2.0)
        total = (
            arch.num_layers * layer_weight_bytes(shape) / 2 + 2 * arch.vocab_size * arch.hidden_size
        )
        # Gemma ties embedding and lm_head: counted twice here (conservative).
        tolerance = 0.06 if "gemma" in arch.model else 0.005
        assert total / 1e9 == pytest.approx(arch.total_params_b, rel=tolerance), arch.model


def test_gqa_kv_heads_are_replicated_above_their_count(models) -> None:
    arch = models[LLAMA8]  # 8 KV heads
    per_gpu = [layer_shape(arch, tp, Dtype.BF16, 2.0).kv_bytes_per_token for tp in (1, 2, 4, 8)]
    assert per_gpu == [per_gpu[0] / tp for tp in (1, 2, 4, 8)]
    mla = models["deepseek-ai/DeepSeek-V3"]  # latent KV replicated on every rank
    assert layer_shape(mla, 8, Dtype.FP8, 2.0).kv_bytes_per_token == pytest.approx(
        (mla.kv_lora_rank + mla.qk_rope_head_dim) * 2.0
    )
    assert attention_params(mla) > 0


def test_moe_decode_touches_more_expert_bytes_with_batch(models, gpus) -> None:
    s = spec(models, gpus, "Qwen/Qwen3-30B-A3B")
    constants = memory_constants()
    linear_bytes = decode_terms(s, constants, BATCHES, 1024).memory_ms[0]
    assert np.all(np.diff(linear_bytes) > 0)
    all_weights = s.num_layers * layer_weight_bytes(layer_shape(s.model, 1, Dtype.BF16, 2.0))
    bound_ms = all_weights / (gpus["H100-SXM"].hbm_bandwidth_gbps * 1e9) * 1e3
    assert linear_bytes[-1] <= bound_ms * 1.0001  # never more than every expert


def test_max_decode_batch_follows_kv_capacity(models, gpus) -> None:
    memory = stage_memory(spec(models, gpus), memory_constants())
    batch = max_decode_batch(memory, 4096)
    assert batch * 4096 <= memory.max_kv_tokens < (batch + 1) * 4096
    assert memory.weights_gib * 2**30 == pytest.approx(
        32 * layer_weight_bytes(layer_shape(spec(models, gpus).model, 1, Dtype.BF16, 2.0))
        + embedding_bytes(spec(models, gpus).model, 1, memory_constants())
    )


def test_bad_inputs_name_the_input(models, gpus) -> None:
    llama8, h100 = models[LLAMA8], gpus["H100-SXM"]
    with pytest.raises(ProfileInputError, match="tp=3 does not divide num_heads=32"):
        validate_stage(llama8, h100, 3, 32)
    with pytest.raises(ProfileInputError, match=r"tp=16 not in 1\.\.8"):
        validate_stage(llama8, h100, 16, 32)
    with pytest.raises(ProfileInputError, match="num_layers=33"):
        validate_stage(llama8, h100, 1, 33)
    with pytest.raises(ProfileInputError, match="'H999'"):
        efficiency_for("H999")


def test_layer_options_hold_the_full_model_and_fractions() -> None:
    assert layer_options(80) == (80, 40, 20, 10)
    assert layer_options(61) == (61, 31, 16, 8)
    assert layer_options(61)[0] == 61 and all(
        n == math.ceil(61 / f) for n, f in zip(layer_options(61), (1, 2, 4, 8), strict=True)
    )
