"""The live router against fake engines over real loopback HTTP: P/D, FluidToken, failures."""

from __future__ import annotations

import json
from collections.abc import Callable

from deploy.router.config import RouterConfig
from deploy.router.vllm_engine_adapter import parse_vllm_metrics
from deploy.testing.fake_engine import ThreadedServer
from tests.deploy.router.conftest import HTTP, engine_log, router_config

Start = Callable[[RouterConfig], ThreadedServer]
PROMPT = "one two three four five six seven eight nine ten " * 8


def test_pd_flow_prefills_on_p_then_decodes_on_d_with_its_kv_params(engines, start_router: Start):
    router = start_router(router_config(engines))
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 6}
    response = HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30)
    assert response.status_code == 200
    assert response.json()["usage"]["completion_tokens"] == 6

    prefill = engine_log(engines["p0"]) + engine_log(engines["p1"])
    decode = engine_log(engines["d0"]) + engine_log(engines["d1"])
    assert len(prefill) == 1 and len(decode) == 1
    assert prefill[0]["max_tokens"] == 1 and prefill[0]["stream"] is False
    assert prefill[0]["kv_transfer_params"]["do_remote_decode"] is True
    kv = decode[0]["kv_transfer_params"]
    assert kv["do_remote_prefill"] is True
    assert kv["remote_engine_id"] == prefill[0]["engine"]
    assert decode[0]["max_tokens"] == 6


def test_streaming_chat_is_relayed_as_server_sent_events(engines, start_router: Start):
    router = start_router(router_config(engines))
    body = {
        "model": "fake-model",
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": 5,
        "stream": True,
    }
    with HTTP.stream("POST", f"{router.url}/v1/chat/completions", json=body, timeout=30) as r:
        assert r.status_code == 200
        lines = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    texts = [json.loads(line[6:])["choices"][0]["text"] for line in lines[:-1]]
    assert len(texts) == 5
    assert any(
        e["chat"] and e["stream"] for e in engine_log(engines["d0"]) + engine_log(engines["d1"])
    )


def test_fluid_token_sends_the_whole_request_to_a_decode_instance(engines, start_router: Start):
    # The router believes its prefill workers slow (10 ms per prompt token: p_P ~ 2 for this
    # prompt), so a decode worker with TPOT slack takes the request and prefills it locally.
    slow = {"prefill_s_per_token": 0.01}
    config = router_config(engines, instance_perf={"p0": slow, "p1": slow})
    router = start_router(config)
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 4}
    response = HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30)
    assert response.status_code == 200
    assert engine_log(engines["p0"]) == [] and engine_log(engines["p1"]) == []
    decode = engine_log(engines["d0"]) + engine_log(engines["d1"])
    assert len(decode) == 1 and decode[0]["kv_transfer_params"] == {}
    metrics = HTTP.get(f"{router.url}/metrics", timeout=5).text
    assert 'coral_router_decisions_total{kind="fluid_token"} 1.0' in metrics


def test_dead_instances_are_retried_on_others(engines, start_router: Start):
    config = router_config(engines, scrape_interval_s=3600.0)
    router = start_router(config)
    # p0 and d0 are first choices on an idle cluster (ties keep config order); kill both after
    # the router's first scrape saw them alive.
    engines["p0"].stop()
    engines["d0"].stop()
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 3}
    for _ in range(3):
        response = HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30)
        assert response.status_code == 200
    assert len(engine_log(engines["p1"])) == 3 and len(engine_log(engines["d1"])) == 3
    failures = HTTP.get(f"{router.url}/metrics", timeout=5).text
    assert 'coral_router_upstream_failures_total{worker="p0"}' in failures
    assert 'coral_router_upstream_failures_total{worker="d0"}' in failures


def test_all_instances_dead_answers_503(engines, start_router: Start):
    router = start_router(router_config(engines, scrape_interval_s=3600.0, max_attempts=2))
    for server in engines.values():
        server.stop()
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 3}
    assert HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30).status_code == 503


def test_client_kv_params_and_foreign_paths_never_reach_other_hosts(engines, start_router: Start):
    router = start_router(router_config(engines))
    evil = {"do_remote_prefill": True, "remote_host": "203.0.113.9", "remote_engine_id": "evil"}
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 2, "kv_transfer_params": evil}
    assert HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30).status_code == 200
    logs = [e for name in engines for e in engine_log(engines[name])]
    assert all(e["kv_transfer_params"].get("remote_host") != "203.0.113.9" for e in logs)
    assert all(e["kv_transfer_params"].get("remote_engine_id") != "evil" for e in logs)
    # No path or header names an upstream: proxy-style requests are simply not routes.
    for path in ("/http://203.0.113.9/v1/completions", "/proxy/v1/completions"):
        assert HTTP.post(f"{router.url}{path}", json=body, timeout=5).status_code in (404, 405)
    assert len([e for name in engines for e in engine_log(engines[name])]) == len(logs)


def test_client_errors_pass_through(engines, start_router: Start):
    router = start_router(router_config(engines))
    response = HTTP.post(f"{router.url}/v1/completions", content=b"not json", timeout=5)
    assert response.status_code == 400


def test_engine_and_router_metrics_parse(engines, start_router: Start):
    router = start_router(router_config(engines))
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": 4}
    assert HTTP.post(f"{router.url}/v1/completions", json=body, timeout=30).status_code == 200
    decode_text = "".join(
        HTTP.get(f"{engines[n].url}/metrics", timeout=5).text for n in ("d0", "d1")
    )
    assert "vllm:generation_tokens_total" in decode_text
    prefill = [parse_vllm_metrics(HTTP.get(f"{engines[n].url}/metrics").text) for n in ("p0", "p1")]
    assert sum(m.prompt_tokens_total for m in prefill) > 0
    assert any(m.prefill_time_mean_s is not None for m in prefill)
    own = HTTP.get(f"{router.url}/metrics", timeout=5).text
    assert 'coral_router_decisions_total{kind="pd"} 1.0' in own
    assert 'coral_router_worker_role{role="prefill",worker="p0"} 1.0' in own
    assert 'coral_router_pressure{role="decode"}' in own
