"""Per-request queue wait before prefill, and per-instance model/region in the usage."""

from __future__ import annotations

import pytest

from planning.domain import Phase
from planning.simulator import SimInstance
from tests.planning.simulator.helpers import MODEL, perf, simulate


def test_second_prompt_waits_for_the_first_prefill_batch() -> None:
    # budget 1000 tokens: two 800-token prompts at t=0 go in two batches; the second waits
    # for the first's issue interval, 0.02 + 800 * 1e-4 = 0.1 s.
    instances = [
        SimInstance(perf("p", prefill_token_budget=1000), Phase.PREFILL, "r1", "aws"),
        SimInstance(perf("d"), Phase.DECODE, "r1", "aws"),
    ]
    result = simulate([(0.0, 800, 5), (0.0, 800, 5)], instances)
    waits = sorted(r.queue_s for r in result.per_request)
    assert waits == pytest.approx([0.0, 0.1])
    assert [(u.model, u.region) for u in result.instances] == [(MODEL, "r1")] * 2


def test_local_prefill_queue_is_the_wait_for_a_batch_slot() -> None:
    instances = [SimInstance(perf("c", max_batch=1), Phase.COLOCATED)]
    result = simulate([(0.0, 100, 3), (0.0, 100, 3)], instances)
    first, second = sorted(result.per_request, key=lambda r: r.queue_s)
    assert first.queue_s == 0.0
    assert second.queue_s == pytest.approx(first.e2e_s)  # admitted when the first leaves
