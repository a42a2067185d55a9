"""The static policy and the router registry."""

from __future__ import annotations

import pytest

from planning.domain import Phase
from planning.routing import RouterPolicy, make_router
from planning.routing.base_router import ClusterState, InstanceView, Reject, Route
from planning.workload import ModelSpec, Request
from tests.planning.simulator.helpers import MODEL, perf


def view(
    i: int, role: Phase, queued: int = 0, kv_used: int = 0, model: str = MODEL
) -> InstanceView:
    p = perf(f"i{i}")
    return InstanceView(
        instance_id=i,
        model=model,
        role=role,
        accepting=True,
        pending_role=None,
        queued_prompt_tokens=queued,
        prefill_tokens_per_s=p.prefill_tokens_per_s,
        prefill_busy_until_s=0.0,
        decode_batch=0,
        decode_waiting=0,
        mean_context_tokens=0.0,
        kv_used_tokens=kv_used,
        kv_capacity_tokens=p.kv_capacity_tokens,
        step_time_s=0.0,
        perf=p,
    )


def state(*views: InstanceView) -> ClusterState:
    return ClusterState(0.0, views, {MODEL: ModelSpec(MODEL, 1.0, 0.05)})


def request(i: int = 0, model: str = MODEL) -> Request:
    return Request(i, 0.0, 100, 10, model)


def test_least_loaded_pairs_emptiest_prefill_with_emptiest_decode() -> None:
    s = state(
        view(0, Phase.PREFILL, queued=5000),
        view(1, Phase.PREFILL, queued=100),
        view(2, Phase.DECODE, kv_used=900),
        view(3, Phase.DECODE, kv_used=10),
    )
    assert make_router("static").route(request(), s) == Route(decode_instance=3, prefill_instance=1)


def test_round_robin_turns_by_request_id() -> None:
    s = state(view(0, Phase.PREFILL), view(1, Phase.PREFILL), view(2, Phase.DECODE))
    router = make_router(RouterPolicy.STATIC, choice="round_robin")
    chosen = [router.route(request(i), s) for i in range(4)]
    assert [r.prefill_instance for r in chosen if isinstance(r, Route)] == [0, 1, 0, 1]


def test_colocated_instances_get_local_prefill_and_other_models_are_ignored() -> None:
    s = state(
        view(0, Phase.PREFILL, model="other"),
        view(1, Phase.COLOCATED, queued=300),
        view(2, Phase.COLOCATED, queued=200),
    )
    assert make_router("static").route(request(), s) == Route(decode_instance=2)


def test_no_instance_for_the_model_rejects_and_static_never_flips_roles() -> None:
    s = state(view(0, Phase.PREFILL), view(1, Phase.DECODE))
    router = make_router("static")
    assert isinstance(router.route(request(model="unknown"), s), Reject)
    assert router.control(s) == () and router.control_interval_s == 0


def test_predicted_prefill_wait_is_backlog_over_throughput() -> None:
    v = view(0, Phase.PREFILL, queued=16384)
    assert v.predicted_prefill_wait_s(0.0) == pytest.approx(16384 / v.prefill_tokens_per_s)
    assert v.prefill_tokens_per_s == pytest.approx(8192 / (0.02 + 8192e-4))


def test_unknown_policy_is_refused() -> None:
    with pytest.raises(ValueError):
        make_router("random")
