"""FluidPD: SLO attainment vs offered load on shifting Azure traces, a parameter sweep, the live
router's per-request overhead, and the policy's decisions per second.

Simulated deployment: 4 x (Llama-3.1-8B-Instruct on 1 x H100-SXM, BF16), latencies from the
project's analytic roofline (`profiling.analytic_backend`, calibrated), prefill token budget 2,048
(vLLM's `--max-num-batched-tokens` on every instance, so FluidToken chunks stay bounded),
SLOs of the `chat` class (TTFT 1 s, TPOT 50 ms). Static P/D is 2 prefill + 2 decode; colocated is
4 plain vLLM replicas. Workload "shift": Azure 2023 conversation trace for a segment, then the code
trace (prompt-heavy: mean 2,048 prompt / 28 output tokens), then conversation again, each segment
replayed `x` times faster than recorded (`planning.workload.time_slice`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import httpx

from catalog_db import queries
from catalog_db.connection import read_connection
from catalog_db.setup import init_catalog
from catalog_db.traces import load_trace
from deploy.testing.fake_engine import free_port
from planning import simulator
from planning.domain import Dtype, Phase
from planning.perf_table import PerfTable, StageKey
from planning.routing import make_router
from planning.routing.fluidpd_params import FluidPDParams
from planning.routing.fluidpd_router import ClusterView, WorkerRole, WorkerView, route_request
from planning.routing.instance_perf import InstancePerf, from_tables
from planning.routing.pressure import LinearStepModel, WorkerLoad
from planning.simulator import SimInstance, SimResult
from planning.workload import ModelSpec, Trace, Workload, time_slice
from profiling.analytic_backend import analytic_result
from profiling.base_backend import BackendName, ProfileJob

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
GPU = "H100-SXM"
SPEC = ModelSpec(MODEL, ttft_slo_s=1.0, tpot_slo_s=0.05)
SEGMENT_S = 40.0
SCALES = (3.0, 6.0, 8.0, 10.0, 12.0, 14.0)
POLICIES = ("static", "fluidtoken", "fluidrole", "fluidpd")
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SEQ_LENS = (16, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)


def h100_llama8b() -> InstancePerf:
    """One H100 serving Llama-3.1-8B, from the analytic backend's grids."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "catalog.duckdb"
        init_catalog(path)
        with read_connection(path) as con:
            model, gpu = queries.model(con, MODEL), queries.gpu_type(con, GPU)
    tables = {}
    for phase in (Phase.PREFILL, Phase.DECODE):
        job = ProfileJob(
            model, gpu, 1, model.num_layers, phase, Dtype.BF16, BackendName.ANALYTIC,
            BATCHES, SEQ_LENS,
        )  # fmt: skip
        result = analytic_result(job)
        key = StageKey(MODEL, GPU, 1, model.num_layers, phase, Dtype.BF16)
        tables[phase] = PerfTable(
            key, BATCHES, SEQ_LENS, result.latency_ms, "analytic", result.backend_version,
            result.weights_gib, result.kv_gib_per_token, result.max_kv_tokens,
        )  # fmt: skip
    decode = tables[Phase.DECODE]
    return from_tables(
        "h100",
        [tables[Phase.PREFILL]],
        [decode],
        usd_per_hr=4.0,
        gpus=1,
        kv_capacity_tokens=decode.max_kv_tokens or 0,
        kv_bytes_per_token=(decode.kv_gib_per_token or 0.0) * 2**30,
        prefill_token_budget=2048,
    )


def shift_workload(conv: Trace, code: Trace, scale: float) -> Workload:
    """conv -> code -> conv, each `SEGMENT_S` seconds at `scale` x the recorded rate."""
    segments = (
        time_slice(conv, 0.0, SEGMENT_S, scale),
        time_slice(code, 0.0, SEGMENT_S, scale),
        time_slice(conv, SEGMENT_S * scale, SEGMENT_S, scale),
    )
    shifted = [
        replace(r, arrival_s=r.arrival_s + i * SEGMENT_S)
        for i, seg in enumerate(segments)
        for r in seg.requests
    ]
    shifted.sort(key=lambda r: r.arrival_s)
    requests = tuple(replace(r, request_id=i) for i, r in enumerate(shifted))
    return Workload(Trace(f"shift x{scale:g}", requests, 3 * SEGMENT_S), (SPEC,))


def simulate(perf: InstancePerf, workload: Workload, policy: str, **params: object) -> SimResult:
    if policy == "colocated":
        return simulator.run(
            workload, [SimInstance(perf, Phase.COLOCATED)] * 4, make_router("static")
        )
    roles = [Phase.PREFILL, Phase.PREFILL, Phase.DECODE, Phase.DECODE]
    instances = [SimInstance(perf, role) for role in roles]
    return simulator.run(workload, instances, make_router(policy, **params))


def attainment_table(perf: InstancePerf, conv: Trace, code: Trace) -> tuple[str, float, float]:
    """Markdown table; best gain of FluidPD over static (pp); worst deficit of any Fluid variant."""
    lines = [
        "| load x | req/s | static P/D | FluidToken | FluidRole | FluidPD | colocated "
        "| FluidPD - static (pp) | flips |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    best_gain, worst = -100.0, 0.0
    for scale in SCALES:
        workload = shift_workload(conv, code, scale)
        results = {p: simulate(perf, workload, p) for p in (*POLICIES, "colocated")}
        att = {p: 100 * r.slo_attainment for p, r in results.items()}
        gain = att["fluidpd"] - att["static"]
        best_gain = max(best_gain, gain)
        worst = min(worst, *(att[p] - att["static"] for p in POLICIES[1:]))
        cells = " | ".join(f"{att[p]:.1f}" for p in (*POLICIES, "colocated"))
        lines.append(
            f"| {scale:g} | {workload.trace.rate_req_per_s:.1f} | {cells} | {gain:+.1f} "
            f"| {len(results['fluidpd'].role_changes)} |"
        )
    return "\n".join(lines), best_gain, worst


SWEEP: tuple[tuple[str, tuple[float, ...]], ...] = (
    ("fluid_token_trigger_pressure", (0.5, 0.8, 1.0)),
    ("fluid_token_max_step_share", (0.25, 0.5, 1.0)),
    ("fluid_token_max_decode_pressure", (0.5, 0.8, 0.95)),
    ("role_window_s", (1.0, 5.0, 15.0)),
    ("role_imbalance_on", (0.3, 0.5, 1.0)),
)


def sweep_table(perf: InstancePerf, workload: Workload) -> str:
    """One parameter at a time around the defaults, FluidPD at one load."""
    defaults = FluidPDParams()
    lines = ["| parameter | value | FluidPD SLO % | flips |", "|---|---:|---:|---:|"]
    for name, values in SWEEP:
        for value in values:
            changes: dict[str, object] = {name: value}
            if name == "role_imbalance_on":
                changes["role_imbalance_off"] = min(defaults.role_imbalance_off, value)
            result = simulate(perf, workload, "fluidpd", **changes)
            marker = " (default)" if getattr(defaults, name) == value else ""
            lines.append(
                f"| {name} | {value:g}{marker} | {100 * result.slo_attainment:.1f} "
                f"| {len(result.role_changes)} |"
            )
    return "\n".join(lines)


def decisions_per_s(workers: int = 16, seconds: float = 1.0) -> float:
    """`route_request` calls per second on a loaded `workers`-worker view (half per role)."""
    perf = LinearStepModel(0.008, 3e-5, 0.008, 5e-5, 4e-8, 1e-6, 400_000)
    half = workers // 2
    view = ClusterView(
        tuple(
            WorkerView(
                f"w{i}",
                WorkerRole.PREFILL if i < half else WorkerRole.DECODE,
                WorkerLoad(queued_prompt_tokens=5000 * (i % 3), running_seqs=40 + i,
                           context_tokens=50_000.0 + 1000 * i),
                perf,
                perf.kv_capacity_tokens,
            )
            for i in range(workers)
        ),
        ttft_slo_s=1.0,
        tpot_slo_s=0.05,
    )  # fmt: skip
    params = FluidPDParams(fluid_token_trigger_pressure=0.0)  # always evaluate FluidToken too
    return _rate(lambda: route_request(view, 1500, params), seconds)


def _rate(fn: Callable[[], object], seconds: float) -> float:
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            fn()
        count += 100
    return count / (time.perf_counter() - start)


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(int(0.99 * len(ordered)), len(ordered) - 1)]


def _timed_posts(pairs: list[tuple[str, int]], body: dict, n: int) -> list[list[float]]:
    """Latency (s) of `n` rounds; each round times one request per (url, calls) target in turn
    (interleaved, so machine noise hits both alike); `calls` = 2 mimics a client doing P/D."""
    samples: list[list[float]] = [[] for _ in pairs]
    with httpx.Client(trust_env=False, timeout=30) as client:
        for _ in range(n):
            for (url, calls), out in zip(pairs, samples, strict=True):
                start = time.perf_counter()
                for _ in range(calls):
                    client.post(url, json=body).raise_for_status()
                out.append(time.perf_counter() - start)
    return samples


def _spawn(args: list[str], url: str) -> subprocess.Popen[bytes]:
    """Start a server process and wait (bounded) until it answers on `url`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=Path(__file__).parent.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1, trust_env=False).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"{args} did not come up")


def router_overhead(n: int = 300) -> str:
    """p50/p99 added latency of the proxy vs calling the fake engine directly (no sleeps);
    engines and router each in their own process, all on 127.0.0.1."""
    ports = {name: free_port() for name in ("p0", "d0", "r_pd", "r_ft")}
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    procs = [
        _spawn(
            ["deploy.testing.fake_engine", "--id", name, "--port", str(ports[name]),
             "--time-scale", "0"],
            f"{url[name]}/health",
        )
        for name in ("p0", "d0")
    ]  # fmt: skip
    perf = {
        "prefill_fixed_s": 0.005, "prefill_s_per_token": 1e-4, "decode_fixed_s": 0.005,
        "decode_s_per_seq": 2e-4, "decode_s_per_context_token": 0.0,
        "kv_transfer_s_per_token": 0.0, "kv_capacity_tokens": 200_000,
    }  # fmt: skip
    instances = [
        {"id": "p0", "url": url["p0"], "role": "prefill"},
        {"id": "d0", "url": url["d0"], "role": "decode"},
    ]
    modes = {"r_pd": {"fluid_token_enabled": False}, "r_ft": {"fluid_token_trigger_pressure": 0}}
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name, fluidpd in modes.items():
                config = {
                    "listen_port": ports[name], "ttft_slo_s": 1.0, "tpot_slo_s": 0.05,
                    "perf": perf, "fluidpd": fluidpd, "instances": instances,
                }  # fmt: skip
                path = Path(tmp) / f"{name}.json"
                path.write_text(json.dumps(config), encoding="utf-8")
                procs.append(_spawn(["deploy.router.server", str(path)], f"{url[name]}/health"))
            body = {"model": "fake-model", "prompt": "hello world " * 100, "max_tokens": 4}
            api = "/v1/completions"
            d_pd, r_pd, d_ft, r_ft = _timed_posts(
                [(url["d0"] + api, 2), (url["r_pd"] + api, 1), (url["d0"] + api, 1),
                 (url["r_ft"] + api, 1)],
                body,
                n,
            )  # fmt: skip
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=10)
    rows = [
        _overhead_row("P/D (2 upstream calls)", d_pd, r_pd),
        _overhead_row("FluidToken (1 upstream call)", d_ft, r_ft),
    ]
    header = (
        "| path | direct p50 / p99 (ms) | through router p50 / p99 (ms) | added p50 / p99 (ms) |\n"
        "|---|---:|---:|---:|"
    )
    return header + "\n" + "\n".join(rows)


def _overhead_row(label: str, direct: list[float], proxied: list[float]) -> str:
    (d50, d99), (p50, p99) = _percentiles(direct), _percentiles(proxied)
    return (
        f"| {label} | {1e3 * d50:.2f} / {1e3 * d99:.2f} | {1e3 * p50:.2f} / {1e3 * p99:.2f} "
        f"| {1e3 * (p50 - d50):+.2f} / {1e3 * (p99 - d99):+.2f} |"
    )


def run() -> str:
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    perf = h100_llama8b()
    conv, code = load_trace("conv", model=MODEL), load_trace("code", model=MODEL)
    table, best_gain, worst = attainment_table(perf, conv, code)
    stress = 12.0
    sweep = sweep_table(perf, shift_workload(conv, code, stress))
    overhead = router_overhead()
    rate16 = decisions_per_s(16)
    rate4 = decisions_per_s(4)
    elapsed = time.perf_counter() - started
    load = f"1-min load average {load_before:.1f} at start, {os.getloadavg()[0]:.1f} at end"
    return f"""## FluidPD elasticity (issue 8)

Command: `.venv/bin/python -m benchmarks.run fluidpd` ({elapsed:.0f} s; on a shared machine with
other jobs running ({load}), so the wall times below are noisy; the simulated attainments are
deterministic for their inputs).

{__doc__.split(chr(10) + chr(10), 1)[1].strip()}

### SLO attainment (% of requests meeting both TTFT and TPOT) vs offered load, one run each

{table}

Best FluidPD gain over static P/D: **{best_gain:+.1f} pp**. Worst deficit of any FluidPD variant
against static at any load: **{worst:+.1f} pp** (goal: no worse than -1 pp).

### Parameter sensitivity: FluidPD at load x{stress:g}, one parameter changed at a time

{sweep}

### Live router overhead

Loopback; fake engines with zero modelled latency and the router each in their own process;
300 sequential non-streaming requests per path, interleaved with the direct calls; "direct" is
the client calling the engine itself with the same number of calls the router makes. On this
2-core machine the client, two engines and the router share the cores with other jobs.

{overhead}

### Policy speed

`route_request` (pure FluidPD decision with FluidToken evaluated): {rate16:,.0f} decisions/s on
16 workers, {rate4:,.0f} decisions/s on 4 workers (one CPU core, Python).
"""
