"""Fake engines (the TEST DOUBLE) and routers on loopback ports, real HTTP end to end."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from deploy.router.app import create_app
from deploy.router.config import RouterConfig
from deploy.testing.fake_engine import DEFAULT_FAKE_PERF, ThreadedServer, start_fake_engine

# One client for all tests: building an httpx client (its TLS context) costs ~0.1-0.3 s.
HTTP = httpx.Client(timeout=60, trust_env=False)

PERF = {
    "prefill_fixed_s": DEFAULT_FAKE_PERF.prefill_fixed_s,
    "prefill_s_per_token": DEFAULT_FAKE_PERF.prefill_s_per_token,
    "decode_fixed_s": DEFAULT_FAKE_PERF.decode_fixed_s,
    "decode_s_per_seq": DEFAULT_FAKE_PERF.decode_s_per_seq,
    "decode_s_per_context_token": DEFAULT_FAKE_PERF.decode_s_per_context_token,
    "kv_transfer_s_per_token": DEFAULT_FAKE_PERF.kv_transfer_s_per_token,
    "kv_capacity_tokens": DEFAULT_FAKE_PERF.kv_capacity_tokens,
}


@pytest.fixture
def engines() -> Iterator[dict[str, ThreadedServer]]:
    """Two fake prefill-capable and two fake decode-capable engines (all `kv_both`)."""
    servers = {name: start_fake_engine(name) for name in ("p0", "p1", "d0", "d1")}
    yield servers
    for server in servers.values():
        server.stop()


def router_config(
    engines: dict[str, ThreadedServer],
    instance_perf: dict[str, dict[str, float]] | None = None,
    **overrides: Any,
) -> RouterConfig:
    """Config over `engines` (names p* start as prefill, d* as decode); `instance_perf`
    overrides the perf model the router assumes for some instances."""
    instances = [
        {
            "id": name,
            "url": server.url,
            "role": "prefill" if name.startswith("p") else "decode",
            "perf": (instance_perf or {}).get(name),
        }
        for name, server in engines.items()
    ]
    data: dict[str, Any] = {
        "ttft_slo_s": 1.0,
        "tpot_slo_s": 0.05,
        "instances": instances,
        "perf": PERF,
        "scrape_interval_s": 0.2,
        "control_interval_s": 0.05,
        "fluidpd": {"fluid_role_enabled": False},
    }
    data.update(overrides)
    return RouterConfig.model_validate(data)


@pytest.fixture
def start_router() -> Iterator[Callable[[RouterConfig], ThreadedServer]]:
    started: list[ThreadedServer] = []

    def start(config: RouterConfig) -> ThreadedServer:
        server = ThreadedServer(create_app(config)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def engine_log(server: ThreadedServer) -> list[dict[str, Any]]:
    return list(HTTP.get(f"{server.url}/fake/log", timeout=5).json())


def wait_until(predicate: Callable[[], bool], timeout_s: float = 15.0) -> None:
    """Poll `predicate` until true; fail the test after `timeout_s` (a bound, not a timing)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)
