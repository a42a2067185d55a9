"""FluidRole in the live router: drain, then flip, with requests in flight — none lost."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from deploy.router.config import RouterConfig
from deploy.testing.fake_engine import ThreadedServer
from tests.deploy.router.conftest import HTTP, engine_log, router_config, wait_until

Start = Callable[[RouterConfig], ThreadedServer]
PROMPT = "alpha beta gamma delta " * 50


def _request(url: str, i: int) -> int:
    """One request (every third streamed); returns the number of output tokens received."""
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 8, "stream": i % 3 == 0}
    if body["stream"]:
        with HTTP.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
            r.raise_for_status()
            lines = [x for x in r.iter_lines() if x.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        return len(lines) - 1
    r = HTTP.post(f"{url}/v1/completions", json=body, timeout=60)
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def _state(url: str) -> dict:
    return dict(HTTP.get(f"{url}/admin/state", timeout=5).json())


def test_forced_flip_under_load_drains_first_and_loses_nothing(engines, start_router: Start):
    router = start_router(router_config(engines))
    with ThreadPoolExecutor(max_workers=12) as pool:
        futures = [pool.submit(_request, router.url, i) for i in range(48)]
        wait_until(
            lambda: (
                _state(router.url)["instances"]["p1"]["prefill_requests"] > 0
                or all(f.done() for f in futures)
            )
        )
        flip = HTTP.post(
            f"{router.url}/admin/roles", json={"instance": "p1", "role": "decode"}, timeout=5
        )
        assert flip.status_code == 200
        results = [f.result() for f in futures]
    assert results == [8] * 48  # every request answered in full

    wait_until(lambda: _state(router.url)["flips_completed"] == 1)
    state = _state(router.url)
    assert state["instances"]["p1"]["role"] == "decode"
    seen = len(engine_log(engines["p1"]))
    for i in range(12):
        assert _request(router.url, i) == 8
    after = engine_log(engines["p1"])[seen:]
    assert all(not e["kv_transfer_params"].get("do_remote_decode") for e in after)


def test_last_instance_of_a_role_cannot_be_flipped(engines, start_router: Start):
    router = start_router(router_config(engines))
    ok = HTTP.post(f"{router.url}/admin/roles", json={"instance": "p0", "role": "decode"})
    assert ok.status_code == 200
    refused = HTTP.post(f"{router.url}/admin/roles", json={"instance": "p1", "role": "decode"})
    assert refused.status_code == 409
    unknown = HTTP.post(f"{router.url}/admin/roles", json={"instance": "zz", "role": "decode"})
    assert unknown.status_code == 404


def test_controller_flips_a_worker_on_sustained_imbalance(engines, start_router: Start):
    # A 100k-token probe prompt makes predicted TTFT ~10x the SLO on every prefill worker while
    # decode sits idle: a sustained imbalance the controller must answer with one flip
    # (cooldown 1 h keeps it to one).
    fluidpd = {
        "fluid_token_enabled": False,
        "probe_prompt_tokens": 100_000,
        "role_window_s": 0.1,
        "role_cooldown_s": 3600.0,
    }
    router = start_router(router_config(engines, fluidpd=fluidpd))
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(_request, router.url, i) for i in range(24)]
        wait_until(lambda: _state(router.url)["flips_completed"] == 1)
        assert [f.result() for f in futures] == [8] * 24
    roles = [i["role"] for i in _state(router.url)["instances"].values()]
    assert roles.count("prefill") == 3 and roles.count("decode") == 1
    metrics = HTTP.get(f"{router.url}/metrics", timeout=5).text
    assert 'coral_router_role_flips_total{stage="completed"} 1.0' in metrics
