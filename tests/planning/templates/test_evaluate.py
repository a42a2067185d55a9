import pytest

from planning.domain import Phase, WorkloadClass
from planning.perf_table import build_tables
from planning.templates.enumerate import stage_models
from planning.templates.evaluate import PipelineEvaluator, StageSpec
from planning.templates.params import TemplateParams
from tests.planning.templates import synthetic as syn

PARAMS = TemplateParams()
TABLES = tuple(build_tables(syn.profile_points(syn.WORLD_MODELS, syn.WORLD_GPUS)).items())


def _stage(arch, gpu: str, tp: int, phase: Phase):  # type: ignore[no-untyped-def]
    models = stage_models(arch, phase, syn.WORLD_GPUS, TABLES, PARAMS)
    return next(m for s, m in models.items() if s.gpu_type == gpu and s.tp == tp)


def _lat(arch, gpu, tp, n, phase, batch, seq) -> float:  # type: ignore[no-untyped-def]
    g = next(x for x in syn.WORLD_GPUS if x.gpu_type == gpu)
    return syn.latency_ms(arch, g, tp, n, phase, batch, seq) / 1e3


def test_single_stage_prefill_is_the_largest_batch_under_ttft() -> None:
    w = syn.CHAT
    rating = PipelineEvaluator(syn.SMALL, w, Phase.PREFILL, PARAMS).evaluate(
        [StageSpec(_stage(syn.SMALL, "MID", 1, Phase.PREFILL))]
    )
    assert rating is not None
    b = rating.batch
    ttft = _lat(syn.SMALL, "MID", 1, 32, Phase.PREFILL, b, w.input_tokens)
    assert rating.latency_s == pytest.approx(ttft)
    assert ttft <= w.ttft_slo_s < _lat(syn.SMALL, "MID", 1, 32, Phase.PREFILL, b + 1, 1024)
    assert rating.throughput_tokens_per_s == pytest.approx(b * w.input_tokens / ttft)


def test_decode_batch_is_limited_by_kv_memory() -> None:
    w = WorkloadClass("relaxed", 1024, 256, 10.0, 10.0)  # SLOs never bind
    stage = _stage(syn.SMALL, "SMALL", 1, Phase.DECODE)
    rating = PipelineEvaluator(syn.SMALL, w, Phase.DECODE, PARAMS).evaluate([StageSpec(stage)])
    assert rating is not None
    capacity = stage.capacity_tokens[31]
    assert rating.batch == capacity // (w.input_tokens + w.output_tokens)
    step = _lat(syn.SMALL, "SMALL", 1, 32, Phase.DECODE, rating.batch, 1024 + 128)
    assert rating.throughput_tokens_per_s == pytest.approx(rating.batch / step)


def test_two_stage_prefill_balances_layers_and_pays_handoff() -> None:
    w = syn.CHAT
    specs = [StageSpec(_stage(syn.LARGE, g, 2, Phase.PREFILL)) for g in ("BIG", "MID")]
    rating = PipelineEvaluator(syn.LARGE, w, Phase.PREFILL, PARAMS).evaluate(specs)
    assert rating is not None
    big, mid = rating.split.layers
    assert big + mid == 80 and big > mid  # the faster GPU takes more layers
    b = rating.batch
    handoff = b * w.input_tokens * 8192 * 2 / 12.5e9 + 50e-6
    expected = (
        _lat(syn.LARGE, "BIG", 2, big, Phase.PREFILL, b, 1024)
        + _lat(syn.LARGE, "MID", 2, mid, Phase.PREFILL, b, 1024)
        + handoff
    )
    assert rating.latency_s == pytest.approx(expected, rel=1e-6)


def test_colocated_meets_both_slos() -> None:
    w = syn.CHAT
    spec = StageSpec(
        _stage(syn.SMALL, "BIG", 1, Phase.DECODE), _stage(syn.SMALL, "BIG", 1, Phase.PREFILL)
    )
    rating = PipelineEvaluator(syn.SMALL, w, Phase.COLOCATED, PARAMS).evaluate([spec])
    assert rating is not None and rating.throughput_req_per_s is not None
    d = rating.batch
    step = _lat(syn.SMALL, "BIG", 1, 32, Phase.DECODE, d, 1152) + d / 256 * _lat(
        syn.SMALL, "BIG", 1, 32, Phase.PREFILL, 1, 1024
    )
    assert rating.latency_s == pytest.approx(step) and step <= w.tpot_slo_s
    assert max(1, 256 / d) * step <= w.ttft_slo_s
    assert rating.throughput_req_per_s == pytest.approx(d / (256 * step))


def test_impossible_slo_gives_no_rating() -> None:
    w = WorkloadClass("instant", 1024, 256, 1e-4, 1e-4)
    stage = StageSpec(_stage(syn.SMALL, "BIG", 1, Phase.PREFILL))
    assert PipelineEvaluator(syn.SMALL, w, Phase.PREFILL, PARAMS).evaluate([stage]) is None
