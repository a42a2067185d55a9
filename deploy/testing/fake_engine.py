"""TEST DOUBLE — a fake vLLM engine for testing the live router without a GPU.

Not a model server. It speaks the slice of vLLM's OpenAI-compatible API the router uses
(`/v1/completions`, `/v1/chat/completions`, streaming or not, `/v1/models`, `/health`,
`/metrics`), honours NIXL-style `kv_transfer_params` (a prefill call with `do_remote_decode`
returns one token and the params a decode worker needs; a decode call with `do_remote_prefill`
skips the prefill), emits vLLM-named Prometheus metrics, and sleeps per a `LinearStepModel`
(scaled by `time_scale`) so queues and pressure behave plausibly. Every request it serves is
logged (`GET /fake/log`) so tests can check which request shape reached which worker.

Tokens are counted as whitespace-separated words of the prompt (a stand-in for a tokenizer).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from planning.routing.pressure import LinearStepModel

DEFAULT_FAKE_PERF = LinearStepModel(
    prefill_fixed_s=0.005,
    prefill_s_per_token=0.0001,
    decode_fixed_s=0.005,
    decode_s_per_seq=0.0002,
    decode_s_per_context_token=0.0,
    kv_transfer_s_per_token=0.0,
    kv_capacity_tokens=200_000,
)


@dataclass
class FakeEngineState:
    """Mutable bookkeeping of one fake engine (a test double, so plain mutable state)."""

    engine_id: str
    model: str
    perf: LinearStepModel
    time_scale: float
    waiting: int = 0
    running: int = 0
    context_tokens: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)
    prefill_lock: asyncio.Lock = field(default_factory=asyncio.Lock)


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """Whitespace word count of the prompt or the chat messages (at least 1)."""
    if "messages" in body:
        text = " ".join(str(m.get("content", "")) for m in body["messages"])
    else:
        prompt = body.get("prompt", "")
        text = " ".join(prompt) if isinstance(prompt, list) else str(prompt)
    return max(len(text.split()), 1)


def _metrics(registry: CollectorRegistry, model: str) -> dict[str, Any]:
    labels = ["model_name", "engine"]

    def gauge(name: str) -> Gauge:
        return Gauge(name, name, labels, registry=registry)

    def hist(name: str) -> Histogram:
        return Histogram(name, name, labels, registry=registry)

    return {
        "running": gauge("vllm:num_requests_running"),
        "waiting": gauge("vllm:num_requests_waiting"),
        "kv": gauge("vllm:kv_cache_usage_perc"),
        "ttft": hist("vllm:time_to_first_token_seconds"),
        "itl": hist("vllm:inter_token_latency_seconds"),
        "prefill": hist("vllm:request_prefill_time_seconds"),
        "prompt": Counter("vllm:prompt_tokens", "prompt tokens", labels, registry=registry),
        "gen": Counter("vllm:generation_tokens", "generated tokens", labels, registry=registry),
    }


def create_fake_engine(
    engine_id: str,
    model: str = "fake-model",
    perf: LinearStepModel = DEFAULT_FAKE_PERF,
    time_scale: float = 1.0,
    port: int = 0,
) -> FastAPI:
    """The FastAPI app of one fake engine. `port` is only echoed in `kv_transfer_params`."""
    state = FakeEngineState(engine_id, model, perf, time_scale)
    registry = CollectorRegistry()
    metrics = _metrics(registry, model)
    app = FastAPI(title=f"fake-engine {engine_id} (TEST DOUBLE)")
    app.state.fake = state

    def refresh_gauges() -> None:
        labels = {"model_name": model, "engine": "0"}
        metrics["running"].labels(**labels).set(state.running)
        metrics["waiting"].labels(**labels).set(state.waiting)
        usage = state.context_tokens / perf.kv_capacity_tokens if perf.kv_capacity_tokens else 0
        metrics["kv"].labels(**labels).set(min(usage, 1.0))

    async def serve(body: dict[str, Any], chat: bool) -> Response:
        kv_in = body.get("kv_transfer_params") or {}
        entry = {
            "engine": engine_id,
            "chat": chat,
            "max_tokens": body.get("max_tokens"),
            "stream": bool(body.get("stream")),
            "kv_transfer_params": kv_in,
            "request_id": str(uuid.uuid4()),
        }
        state.log.append(entry)
        if kv_in.get("do_remote_decode"):
            return JSONResponse(await _prefill_only(state, metrics, body, chat, entry, port))
        generator = _generate(state, metrics, body, chat, bool(kv_in.get("do_remote_prefill")))
        if body.get("stream"):
            return StreamingResponse(_sse(generator), media_type="text/event-stream")
        return JSONResponse(await _collect(generator, body, chat, model))

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await serve(await request.json(), chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await serve(await request.json(), chat=True)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model, "object": "model"}]}

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/metrics")
    async def prom() -> Response:
        refresh_gauges()
        return Response(generate_latest(registry), media_type="text/plain; version=0.0.4")

    @app.get("/fake/log")
    async def fake_log() -> list[dict[str, Any]]:
        return state.log

    return app


async def _prefill(state: FakeEngineState, metrics: dict[str, Any], tokens: int) -> float:
    """Queue for the (serial) prefill unit, then sleep the modelled prefill; returns seconds."""
    state.waiting += 1
    started = time.perf_counter()
    acquired = False
    try:
        async with state.prefill_lock:
            acquired = True
            state.waiting -= 1
            await asyncio.sleep(state.perf.prefill_s(tokens) * state.time_scale)
    finally:
        if not acquired:
            state.waiting -= 1
    elapsed = time.perf_counter() - started
    labels = {"model_name": state.model, "engine": "0"}
    metrics["prefill"].labels(**labels).observe(elapsed)
    metrics["prompt"].labels(**labels).inc(tokens)
    return elapsed


async def _prefill_only(
    state: FakeEngineState,
    metrics: dict[str, Any],
    body: dict[str, Any],
    chat: bool,
    entry: dict[str, Any],
    port: int,
) -> dict[str, Any]:
    """vLLM's producer side: prefill, emit one token, hand back where the KV blocks are."""
    tokens = count_prompt_tokens(body)
    elapsed = await _prefill(state, metrics, tokens)
    labels = {"model_name": state.model, "engine": "0"}
    metrics["ttft"].labels(**labels).observe(elapsed)
    metrics["gen"].labels(**labels).inc(1)
    kv_out = {
        "do_remote_prefill": True,
        "do_remote_decode": False,
        "remote_engine_id": state.engine_id,
        "remote_block_ids": list(range(max(tokens // 16, 1))),
        "remote_host": "127.0.0.1",
        "remote_port": port,
        "remote_request_id": entry["request_id"],
        "tp_size": 1,
    }
    out = _response_body([" tok0"], chat, state.model, "length", tokens)
    out["kv_transfer_params"] = kv_out
    return out


async def _generate(
    state: FakeEngineState,
    metrics: dict[str, Any],
    body: dict[str, Any],
    chat: bool,
    remote_prefill: bool,
) -> AsyncIterator[str]:
    """Yield output tokens, sleeping one decode step (at the current batch) per token."""
    tokens = count_prompt_tokens(body)
    max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    labels = {"model_name": state.model, "engine": "0"}
    started = time.perf_counter()
    if remote_prefill:
        await asyncio.sleep(state.perf.kv_transfer_s(tokens) * state.time_scale)
    else:
        await _prefill(state, metrics, tokens)
    metrics["ttft"].labels(**labels).observe(time.perf_counter() - started)
    state.running += 1
    state.context_tokens += tokens
    try:
        for i in range(max_tokens):
            if i:
                step = state.perf.decode_step_s(state.running, state.context_tokens)
                await asyncio.sleep(step * state.time_scale)
                metrics["itl"].labels(**labels).observe(step * state.time_scale)
            state.context_tokens += 1
            metrics["gen"].labels(**labels).inc(1)
            yield f" tok{i}"
    finally:
        state.running -= 1
        state.context_tokens -= tokens + max_tokens


async def _sse(tokens: AsyncIterator[str]) -> AsyncIterator[bytes]:
    async for text in tokens:
        chunk = {"object": "text_completion.chunk", "choices": [{"index": 0, "text": text}]}
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


async def _collect(
    tokens: AsyncIterator[str], body: dict[str, Any], chat: bool, model: str
) -> dict[str, Any]:
    texts = [text async for text in tokens]
    return _response_body(texts, chat, model, "length", count_prompt_tokens(body))


def _response_body(
    texts: list[str], chat: bool, model: str, finish: str, prompt_tokens: int
) -> dict[str, Any]:
    text = "".join(texts)
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": f"fake-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion" if chat else "text_completion",
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(texts),
            "total_tokens": prompt_tokens + len(texts),
        },
    }


def free_port() -> int:
    """An unused TCP port on 127.0.0.1 (racy by nature; fine for tests)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ThreadedServer:
    """Run an ASGI app under uvicorn on 127.0.0.1 in a daemon thread (tests and benchmarks)."""

    def __init__(self, app: Any, port: int | None = None) -> None:
        self.port = port or free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 10.0) -> ThreadedServer:
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"server on port {self.port} did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self.server.should_exit = True
        self.thread.join(timeout_s)


def start_fake_engine(engine_id: str, time_scale: float = 1.0, **kwargs: Any) -> ThreadedServer:
    """Start one fake engine on a free loopback port and return its running server."""
    port = free_port()
    app = create_fake_engine(engine_id, time_scale=time_scale, port=port, **kwargs)
    return ThreadedServer(app, port).start()


def main(argv: list[str] | None = None) -> None:
    """`python -m deploy.testing.fake_engine --id p0 --port 8100`: serve one fake engine on
    127.0.0.1 in its own process (benchmarks measure the router without sharing its GIL)."""
    parser = argparse.ArgumentParser(description="TEST DOUBLE: a fake vLLM engine, no model")
    parser.add_argument("--id", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--model", default="fake-model")
    args = parser.parse_args(argv)
    app = create_fake_engine(args.id, args.model, time_scale=args.time_scale, port=args.port)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
