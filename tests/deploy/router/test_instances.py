"""`PUT /admin/instances`: the instance set changes in place, under load, with nothing lost;
only admins may change it; colocated-only pools route whole requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from deploy.router.app import create_app
from deploy.router.config import RouterConfig
from deploy.testing.fake_engine import ThreadedServer, start_fake_engine
from tests.deploy.router.conftest import HTTP, PERF, engine_log, router_config, wait_until

Start = Callable[[RouterConfig], ThreadedServer]
PROMPT = "alpha beta gamma delta " * 50


def _request(url: str, i: int, max_tokens: int = 8) -> int:
    """One request (every third streamed); returns the number of output tokens received."""
    body = {"model": "fake-model", "prompt": PROMPT, "max_tokens": max_tokens,
            "stream": i % 3 == 0}  # fmt: skip
    if body["stream"]:
        with HTTP.stream("POST", f"{url}/v1/completions", json=body, timeout=60) as r:
            r.raise_for_status()
            lines = [x for x in r.iter_lines() if x.startswith("data: ")]
        assert lines[-1] == "data: [DONE]"
        return len(lines) - 1
    r = HTTP.post(f"{url}/v1/completions", json=body, timeout=60)
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def _instances(engines: dict[str, ThreadedServer], names: list[str]) -> list[dict[str, str]]:
    roles = {"p": "prefill", "d": "decode", "c": "colocated"}
    return [{"id": n, "url": engines[n].url, "role": roles[n[0]]} for n in names]


def _put(url: str, instances: list[dict[str, str]], **kwargs: Any) -> httpx.Response:
    return HTTP.put(f"{url}/admin/instances", json={"instances": instances}, timeout=5, **kwargs)


def _state(url: str) -> dict[str, Any]:
    return dict(HTTP.get(f"{url}/admin/state", timeout=5).json())


def _subset(engines: dict[str, ThreadedServer], names: list[str]) -> dict[str, ThreadedServer]:
    return {n: engines[n] for n in names}


def test_added_instance_takes_traffic_under_load(engines, start_router: Start):
    router = start_router(router_config(_subset(engines, ["p0", "d0"])))
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(_request, router.url, i) for i in range(40)]
        wait_until(lambda: len(engine_log(engines["d0"])) >= 4)
        added = _put(router.url, _instances(engines, ["p0", "d0", "p1", "d1"]))
        assert added.status_code == 200, added.text
        assert sorted(added.json()["added"]) == ["d1", "p1"]
        assert added.json()["removed"] == []
        results = [f.result() for f in futures]
    assert results == [8] * 40
    for i in range(12):  # the new pool serves: both new instances get work
        assert _request(router.url, i) == 8
    assert engine_log(engines["d1"]) and engine_log(engines["p1"])
    assert set(_state(router.url)["instances"]) == {"p0", "d0", "p1", "d1"}


def test_removed_instance_drains_mid_flight_and_loses_nothing(engines, start_router: Start):
    router = start_router(router_config(engines))
    with ThreadPoolExecutor(max_workers=12) as pool:
        futures = [pool.submit(_request, router.url, i, 40) for i in range(48)]
        wait_until(lambda: _state(router.url)["instances"]["d1"]["decode_seqs"] > 0)
        removed = _put(router.url, _instances(engines, ["p0", "d0"]))
        assert removed.status_code == 200, removed.text
        assert sorted(removed.json()["removed"]) == ["d1", "p1"]
        assert removed.json()["retiring"].get("d1", 0) > 0  # it still had requests running
        results = [f.result() for f in futures]
    assert results == [40] * 48  # every request answered in full: none lost

    wait_until(lambda: not _state(router.url)["retiring"])  # drained, then forgotten
    seen = {n: len(engine_log(engines[n])) for n in ("p1", "d1")}
    for i in range(12):
        assert _request(router.url, i) == 8
    assert {n: len(engine_log(engines[n])) for n in ("p1", "d1")} == seen
    assert set(_state(router.url)["instances"]) == {"p0", "d0"}


def test_kept_instance_keeps_its_flipped_role(engines, start_router: Start):
    router = start_router(router_config(engines))
    flip = HTTP.post(f"{router.url}/admin/roles", json={"instance": "p1", "role": "decode"})
    assert flip.status_code == 200
    wait_until(lambda: _state(router.url)["instances"]["p1"]["role"] == "decode")
    # The rollout still lists p1 as prefill: FluidRole's live role wins for a kept instance.
    kept = _put(router.url, _instances(engines, ["p0", "p1", "d0"]))
    assert kept.status_code == 200
    roles = {i["id"]: i["role"] for i in kept.json()["instances"]}
    assert roles == {"p0": "prefill", "p1": "decode", "d0": "decode"}


def test_invalid_instance_sets_change_nothing(engines, start_router: Start):
    router = start_router(router_config(engines))
    before = _state(router.url)["instances"]
    only_prefill = _put(router.url, _instances(engines, ["p0", "p1"]))
    assert only_prefill.status_code == 409
    twice = _put(router.url, _instances(engines, ["p0", "d0"]) * 2)
    assert twice.status_code == 409
    mixed = [*_instances(engines, ["p0", "d0"]), {"id": "c9", "url": engines["d1"].url,
                                                   "role": "colocated"}]  # fmt: skip
    assert _put(router.url, mixed).status_code == 409
    bad_url = [{"id": "x", "url": "file:///etc/passwd", "role": "decode"}]
    assert _put(router.url, [*_instances(engines, ["p0"]), *bad_url]).status_code == 422
    extra = [{**i, "weight": 2} for i in _instances(engines, ["p0", "d0"])]
    assert _put(router.url, extra).status_code == 422
    assert _state(router.url)["instances"] == before


async def _call(app: Any, host: str, method: str, path: str, **kwargs: Any) -> int:
    transport = httpx.ASGITransport(app=app, client=(host, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://router") as client:
        return (await client.request(method, path, **kwargs)).status_code


def test_instances_admin_refuses_remote_and_unauthenticated_callers(engines):
    body = {"instances": [{"id": "evil", "url": "http://203.0.113.9:80", "role": "decode"},
                          {"id": "p0", "url": engines["p0"].url, "role": "prefill"}]}  # fmt: skip
    open_app = create_app(router_config(engines))
    assert asyncio.run(_call(open_app, "203.0.113.7", "PUT", "/admin/instances", json=body)) == 403
    assert asyncio.run(_call(open_app, "203.0.113.7", "GET", "/admin/instances")) == 403
    token_app = create_app(router_config(engines, admin_token="s3cret"))
    for host in ("127.0.0.1", "203.0.113.7"):
        assert asyncio.run(_call(token_app, host, "PUT", "/admin/instances", json=body)) == 401
        wrong = {"Authorization": "Bearer nope"}
        status = asyncio.run(
            _call(token_app, host, "PUT", "/admin/instances", json=body, headers=wrong)
        )
        assert status == 401
    for app in (open_app, token_app):  # no upstream was added by any refused call
        assert "evil" not in app.state.runtime.workers
    auth = {"Authorization": "Bearer s3cret"}
    ok = asyncio.run(_call(token_app, "203.0.113.7", "PUT", "/admin/instances", json=body,
                           headers=auth))  # fmt: skip
    assert ok == 200 and "evil" in token_app.state.runtime.workers


def test_colocated_only_router_routes_whole_requests(start_router: Start):
    servers = {name: start_fake_engine(name) for name in ("c0", "c1")}
    try:
        config = {"ttft_slo_s": 1.0, "tpot_slo_s": 0.05, "perf": PERF,
                  "instances": _instances(servers, ["c0", "c1"])}  # fmt: skip
        router = start_router(RouterConfig.model_validate(config))
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(lambda i: _request(router.url, i), range(16)))
        assert results == [8] * 16
        logs = {n: engine_log(s) for n, s in servers.items()}
        assert all(logs.values())  # least loaded: both replicas take work
        entries = [e for log in logs.values() for e in log]
        assert len(entries) == 16  # one whole request each, no P/D legs
        assert not any(e["kv_transfer_params"] for e in entries)
        flip = HTTP.post(f"{router.url}/admin/roles", json={"instance": "c0", "role": "decode"})
        assert flip.status_code == 409
        assert _state(router.url)["instances"]["c0"]["role"] == "colocated"
    finally:
        for server in servers.values():
            server.stop()
