"""The live router's state: a flip completes only once the worker has drained."""

from __future__ import annotations

from deploy.router.config import RouterConfig
from deploy.router.runtime import RouterRuntime
from planning.routing.fluidpd_router import RoleFlip, WorkerRole
from tests.deploy.router.conftest import PERF


def _runtime() -> RouterRuntime:
    config = RouterConfig.model_validate({
        "ttft_slo_s": 1.0, "tpot_slo_s": 0.05, "perf": PERF,
        "instances": [{"id": "p0", "url": "http://127.0.0.1:9", "role": "prefill"},
                      {"id": "p1", "url": "http://127.0.0.1:9", "role": "prefill"},
                      {"id": "d0", "url": "http://127.0.0.1:9", "role": "decode"}],
    })  # fmt: skip
    return RouterRuntime.from_config(config)


def test_flip_waits_for_in_flight_work_of_the_old_role():
    runtime = _runtime()
    p1 = runtime.workers["p1"]
    p1.prefill_requests = 2
    runtime.apply_flip(RoleFlip("p1", WorkerRole.DECODE, completed=False))
    assert p1.draining_to is WorkerRole.DECODE and p1.role is WorkerRole.PREFILL
    view = {w.worker_id: w for w in runtime.view().workers}
    assert not view["p1"].accepting and view["p1"].in_flight_role_work == 2
    runtime.apply_flip(RoleFlip("p1", WorkerRole.DECODE, completed=True))
    assert p1.role is WorkerRole.PREFILL  # still busy: not switched
    p1.prefill_requests = 0
    runtime.apply_flip(RoleFlip("p1", WorkerRole.DECODE, completed=True))
    assert p1.role is WorkerRole.DECODE and p1.draining_to is None
    assert (runtime.flips_started, runtime.flips_completed) == (1, 1)


def test_flip_to_the_current_role_or_an_unknown_worker_is_ignored():
    runtime = _runtime()
    runtime.apply_flip(RoleFlip("p0", WorkerRole.PREFILL, completed=False))
    runtime.apply_flip(RoleFlip("zz", WorkerRole.DECODE, completed=False))
    assert runtime.flips_started == 0
    assert all(w.draining_to is None for w in runtime.workers.values())
