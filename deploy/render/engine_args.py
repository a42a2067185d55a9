"""vLLM engine arguments and environment of one instance (pure).

Every flag and variable here is listed in `deploy/render/vllm_flags.csv` with the vLLM source
it was checked against. Policy choices, with their reasons:
- KV roles (DESIGN.md "Engine facts"): prefill → `kv_producer`, decode → `kv_consumer`;
  with FluidRole on, single-stage P/D instances run `kv_both` so the router can flip them in
  place. A group whose prefill side pipelines (PP > 1) uses `NixlPushConnector` on both sides
  and keeps fixed roles (a PP prefill cannot become a decode: vLLM has no PP decode).
- `--max-num-seqs`: the template's evaluated max batch (decode: the largest batch under the
  TPOT SLO that fits the KV cache), else vLLM's default of 256.
- `--max-num-batched-tokens`: prefill, one full batch of the class's prompts per step; decode,
  one token per running sequence plus, with FluidToken, one prefill chunk; a flippable
  (`kv_both`) decode instance also fits one whole prompt per step, for when it runs prefill.
- `--long-prefill-token-threshold` (FluidToken on decode workers): a static ceiling of
  `fluid_token_max_step_share` × the class's prompt length, rounded down to whole KV blocks.
  The router enforces the live per-step budget (`planning.routing.pressure`); the engine flag
  only stops one long local prompt from taking a whole step.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from planning.domain import Phase

PUSH_CONNECTOR = "NixlPushConnector"
PULL_CONNECTOR = "NixlConnector"


@dataclass(frozen=True, slots=True)
class RenderOptions:
    engine_port: int = 8000
    router_port: int = 9000
    nixl_side_channel_port: int = 5600  # vLLM's default (vllm/envs.py)
    gpu_memory_utilization: float = 0.90  # vLLM's default, written out: profiles assumed it
    default_max_num_seqs: int = 256  # vLLM's default on GPUs
    kv_block_tokens: int = 16  # vLLM's default CUDA block size


@dataclass(frozen=True, slots=True)
class EngineShape:
    """The facts one instance's arguments depend on."""

    role: Phase
    tp: int
    pp: int
    multi_machine: bool
    max_batch: int | None
    input_tokens: int
    connector: str | None  # None: no KV transfer (colocated, or a group without P/D pairs)
    flip_enabled: bool  # FluidRole on for this group
    fluid_token: bool
    fluid_token_max_step_share: float


def kv_role(shape: EngineShape) -> str | None:
    if shape.connector is None or shape.role is Phase.COLOCATED:
        return None
    if shape.flip_enabled and shape.pp == 1 and shape.connector == PULL_CONNECTOR:
        return "kv_both"
    return "kv_producer" if shape.role is Phase.PREFILL else "kv_consumer"


def fluid_token_chunk_tokens(shape: EngineShape, options: RenderOptions) -> int:
    block = options.kv_block_tokens
    raw = int(shape.input_tokens * shape.fluid_token_max_step_share)
    return max(block, raw // block * block)


def _budgets(shape: EngineShape, role: str | None, options: RenderOptions) -> tuple[int, int, int]:
    """(max_num_seqs, max_num_batched_tokens, long_prefill_token_threshold or 0)."""
    seqs = shape.max_batch or options.default_max_num_seqs
    prefill_tokens = shape.input_tokens * max(1, shape.max_batch or 1)
    does_decode = shape.role is Phase.DECODE or role == "kv_both"
    chunk = fluid_token_chunk_tokens(shape, options) if shape.fluid_token and does_decode else 0
    decode_tokens = seqs + chunk
    if shape.role is Phase.COLOCATED:
        return seqs, max(prefill_tokens, decode_tokens), chunk
    if role == "kv_both":  # flippable: room for one full prompt per step in either role
        own = prefill_tokens if shape.role is Phase.PREFILL else shape.input_tokens
        return seqs, max(own, decode_tokens), chunk
    if shape.role is Phase.PREFILL:
        return seqs, prefill_tokens, 0
    return seqs, decode_tokens, chunk


def engine_args(shape: EngineShape, options: RenderOptions) -> tuple[str, ...]:
    """Arguments after `vllm serve MODEL`, in a fixed order (golden files compare them)."""
    role = kv_role(shape)
    seqs, batched, chunk = _budgets(shape, role, options)
    args = [
        "--tensor-parallel-size", str(shape.tp),
        "--pipeline-parallel-size", str(shape.pp),
    ]  # fmt: skip
    if shape.multi_machine:
        args += ["--distributed-executor-backend", "ray"]
    args += [
        "--max-num-seqs", str(seqs),
        "--max-num-batched-tokens", str(batched),
    ]  # fmt: skip
    if chunk:
        args += ["--long-prefill-token-threshold", str(chunk)]
    args += [
        "--gpu-memory-utilization", f"{options.gpu_memory_utilization:.2f}",
        "--port", str(options.engine_port),
    ]  # fmt: skip
    if role is not None and shape.connector is not None:
        config = {"kv_connector": shape.connector, "kv_role": role}
        args += ["--kv-transfer-config", json.dumps(config, separators=(",", ":"))]
    return tuple(args)


def engine_env(
    shape: EngineShape, pp_layer_partition: str | None, options: RenderOptions, host: str
) -> tuple[tuple[str, str], ...]:
    """Environment of the engine process, sorted by name."""
    env: dict[str, str] = {}
    if shape.pp > 1 and pp_layer_partition:
        env["VLLM_PP_LAYER_PARTITION"] = pp_layer_partition
    if kv_role(shape) is not None:
        env["VLLM_NIXL_SIDE_CHANNEL_HOST"] = host
        env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = str(options.nixl_side_channel_port)
    return tuple(sorted(env.items()))
