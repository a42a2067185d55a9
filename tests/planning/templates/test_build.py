import pytest

from planning.domain import Phase
from planning.perf_table import build_tables
from planning.templates.build import build_templates, template_id
from planning.templates.params import TemplateParams
from tests.planning.templates import synthetic as syn

TABLES = build_tables(syn.profile_points(syn.WORLD_MODELS, syn.WORLD_GPUS))


def _build(**params: object):  # type: ignore[no-untyped-def]
    return build_templates(
        syn.WORLD_MODELS, syn.WORLD_GPUS, [syn.CHAT, syn.CODE], TABLES, TemplateParams(**params)
    )


def test_build_is_deterministic_with_stable_ids() -> None:
    first, second = _build(), _build()
    assert first.templates == second.templates
    for t in first.templates:
        assert t.template_id == template_id(t.model, t.phase, t.workload_class, t.stages)
        assert sum(s.num_layers for s in t.stages) == next(
            m.num_layers for m in syn.WORLD_MODELS if m.model == t.model
        )
    assert len({t.template_id for t in first.templates}) == len(first.templates)


def test_counts_are_consistent() -> None:
    build = _build()
    for c in build.counts:
        assert c.unrestricted >= c.enumerated >= c.evaluated >= c.feasible >= c.kept
    assert build.kept == sum(c.kept for c in build.counts)
    assert len(build.rated) == sum(c.feasible for c in build.counts)


def test_large_model_gets_mixed_pipelines_and_decode_stays_single_stage() -> None:
    build = _build(uniform_tp=False)
    large_prefill = [
        t for t in build.templates if t.model == syn.LARGE.model and t.phase is Phase.PREFILL
    ]
    assert any(len(t.gpu_vector) > 1 for t in large_prefill)
    assert all(len(t.stages) == 1 for t in build.templates if t.phase is not Phase.PREFILL)
    assert all(len(t.stages) <= 4 for t in build.templates)


def test_uniform_tp_and_gpu_type_limit_are_respected() -> None:
    build = _build(max_gpu_types_per_pipeline=1)
    for t in build.rated:
        assert len({s.tp for s in t.stages}) == 1
        assert len(t.gpu_vector) == 1


@pytest.mark.parametrize("phase", list(Phase))
def test_every_phase_rates_the_right_throughput(phase: Phase) -> None:
    build = _build(phases=(phase,))
    assert build.templates and all(t.phase is phase for t in build.templates)
    for t in build.templates:
        assert t.throughput_tokens_per_s and t.throughput_tokens_per_s > 0
        assert (t.throughput_req_per_s is not None) == (phase is Phase.COLOCATED)
