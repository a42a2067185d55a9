"""The job grid: full rectangles, feasible TP, layer fractions, skipped stages, auto backend."""

from __future__ import annotations

import math

import pytest

from planning.domain import Dtype, Phase
from planning.perf_table import build_tables
from profiling.analytic import ProfileInputError, layer_options
from profiling.analytic_backend import analytic_result
from profiling.base_backend import BackendName
from profiling.grid import Shapes, build_jobs, chunk_jobs, feasible_tps

SMALL = Shapes(
    prefill_batch_sizes=(1, 4),
    prefill_seq_lens=(128, 1024, 8192),
    decode_batch_sizes=(1, 16, 256),
    decode_seq_lens=(512, 8192),
)


def test_every_job_is_a_full_rectangle_perf_table_accepts(models, gpus) -> None:
    jobs = build_jobs([models["Qwen/Qwen3-8B"]], [gpus["L4"]], BackendName.ANALYTIC, SMALL)
    points = [p for job in jobs for p in analytic_result(job).points()]
    tables = build_tables(points)
    assert len(tables) == len(jobs)
    for table in tables.values():
        assert table.batches in ((1, 4), (1, 16, 256))
        assert len(table.latency_ms) * len(table.latency_ms[0]) == len(table.batches) * len(
            table.seq_lens
        )


def test_layer_counts_include_full_model_and_fractions(models, gpus) -> None:
    arch = models["meta-llama/Llama-3.1-70B-Instruct"]
    jobs = build_jobs([arch], [gpus["H200-SXM"]], BackendName.ANALYTIC, SMALL)
    for tp in feasible_tps(arch, gpus["H200-SXM"]):
        held = {j.num_layers for j in jobs if j.tp == tp and j.phase == Phase.DECODE}
        expected = {80, 60, 40, 20, 10}  # L, ceil(3L/4), L/2, L/4, L/8
        if tp == 1:  # 80 layers in bf16 (131 GiB) do not fit one 141 GiB x 0.9 H200 with reserve
            assert 80 not in held and held <= expected
        else:
            assert held == expected


def test_default_grid_covers_long_contexts_deep_stages_and_prefill_batch_32(models, gpus) -> None:
    llama, llama2 = models["meta-llama/Llama-3.1-70B-Instruct"], models["meta-llama/Llama-2-7b-hf"]
    jobs = build_jobs([llama, llama2], [gpus["H100-SXM"]], BackendName.ANALYTIC)
    decode = {j.model.model: j.seq_lens for j in jobs if j.phase == Phase.DECODE}
    assert decode[llama.model][-1] == 16384  # the long class: mean 8448, final 8704 tokens
    assert max(decode[llama2.model]) <= llama2.max_position_embeddings
    assert all(j.batch_sizes[-1] == 32 for j in jobs if j.phase == Phase.PREFILL)
    assert {j.num_layers for j in jobs if j.model is llama} >= {60}  # ceil(3 x 80 / 4)
    assert math.ceil(61 * 3 / 4) in layer_options(61, Shapes().layer_fractions)


def test_tp_follows_vllm_rule_and_machine_size(models, gpus) -> None:
    assert feasible_tps(models["meta-llama/Llama-3.1-8B-Instruct"], gpus["H100-SXM"]) == (
        1,
        2,
        4,
        8,
    )
    assert feasible_tps(models["meta-llama/Llama-3.1-8B-Instruct"], gpus["H100-NVL"]) == (1, 2)
    assert feasible_tps(models["meta-llama/Llama-2-13b-hf"], gpus["A10"]) == (1, 2, 4)


def test_stages_that_cannot_fit_are_skipped_and_seq_lens_respect_max_positions(
    models, gpus
) -> None:
    assert build_jobs([models["meta-llama/Llama-3.1-405B-Instruct"]], [gpus["T4"]]) == ()
    jobs = build_jobs([models["meta-llama/Llama-2-7b-hf"]], [gpus["A100-SXM-80GB"]])
    assert jobs and all(max(j.seq_lens) == 4096 for j in jobs)  # max_position_embeddings 4096


def test_auto_uses_aic_where_it_covers_else_analytic(models, gpus) -> None:
    llama = models["meta-llama/Llama-3.1-8B-Instruct"]
    on_h100 = build_jobs([llama], [gpus["H100-SXM"]], BackendName.AUTO, SMALL)
    on_t4 = build_jobs([llama], [gpus["T4"]], BackendName.AUTO, SMALL)
    fp8 = build_jobs([llama], [gpus["H100-SXM"]], BackendName.AUTO, SMALL, dtypes=[Dtype.FP8])
    assert {j.backend for j in on_h100} == {BackendName.AIC}
    assert {j.backend for j in on_t4} == {BackendName.ANALYTIC}
    assert {j.backend for j in fp8} == {BackendName.ANALYTIC}  # aic: default dtype only
    assert len(chunk_jobs(on_h100 + on_t4)) == 2
    qwen = build_jobs([models["Qwen/Qwen3-8B"]], [gpus["H100-SXM"]], BackendName.AUTO, SMALL)
    assert len(chunk_jobs(on_h100 + qwen)) == 1  # aic: one task per GPU type (data loads once)


def test_explicit_tp_that_does_not_divide_heads_is_refused(models, gpus) -> None:
    with pytest.raises(
        ProfileInputError, match="tp=3 does not divide num_heads=32 of Qwen/Qwen3-8B"
    ):
        build_jobs([models["Qwen/Qwen3-8B"]], [gpus["H100-SXM"]], tps=[3])
