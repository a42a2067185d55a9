"""Local target: engines and routers as processes on this host (the GPU dev box case).

Each unit gets its own free ports on 127.0.0.1 (`--port` and the NIXL side-channel port are
rewritten); the launcher that turns a unit into argv is injected (default: its `vllm serve`
command; tests pass the fake engine or a harmless command). Processes this target started are
tracked by pid files under `state_dir`, so a rerun finds them and delete stops only them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deploy.render.units import (
    HOST_IP_PLACEHOLDER,
    DeploymentSpec,
    EngineUnit,
    RouterUnit,
    spec_hash,
    unit_name,
)
from deploy.targets.base_target import (
    HttpRouterAdmin,
    RouterAdmin,
    TargetCannotProvideError,
    TargetName,
    Unit,
    push_router_config,
    register_target,
)

Launcher = Callable[[Unit, int, Path], list[str]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_launcher(unit: Unit, port: int, config_path: Path) -> list[str]:
    """argv of a unit: `vllm serve` for engines (port rewritten), the router server for routers."""
    if isinstance(unit, RouterUnit):
        return ["python", "-m", "deploy.router.server", str(config_path)]
    args = list(unit.command)
    args[args.index("--port") + 1] = str(port)
    return args


class LocalTarget:
    name = TargetName.LOCAL
    reachable = True  # health checks can reach its units from here

    def __init__(
        self,
        state_dir: Path,
        host_gpus: int,
        launcher: Launcher = vllm_launcher,
        router_admin: RouterAdmin | None = None,
    ) -> None:
        self.state_dir = Path(state_dir)
        self.host_gpus = host_gpus
        self.launcher = launcher
        self.router_admin = router_admin or HttpRouterAdmin()

    def bind(self, plan_id: str, deployment_id: str) -> None:
        self.plan_id, self.deployment_id = plan_id, deployment_id

    def check(self, spec: DeploymentSpec) -> None:
        """One host: no multi-machine pipelines, and all GPUs together fit this host's."""
        multi = [e.unit_id for e in spec.engines if e.multi_machine]
        if multi:
            raise TargetCannotProvideError(f"local: pipelines over machines need >1 host: {multi}")
        gpus = sum(g for e in spec.engines for _, g in e.machines)
        if gpus > self.host_gpus:
            raise TargetCannotProvideError(
                f"local: the plan needs {gpus} GPUs, this host has {self.host_gpus}"
            )

    def write_files(self, spec: DeploymentSpec, out_dir: Path) -> tuple[Path, ...]:
        return ()

    def _record_path(self, unit: Unit) -> Path:
        return self.state_dir / f"{unit_name(unit.unit_id)}@{spec_hash(unit.to_dict())}.json"

    def find(self, unit: Unit) -> str | None:
        path = self._record_path(unit)
        if not path.exists():
            return None
        record = json.loads(path.read_text())
        return str(record["external_id"]) if _alive(record["pid"]) else None

    def create(self, unit: Unit, hosts: dict[str, str]) -> str:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        config_path = self.state_dir / f"{unit_name(unit.unit_id)}.router.json"
        if isinstance(unit, RouterUnit):
            config = unit.config(hosts) | {"listen_host": "127.0.0.1", "listen_port": port}
            config_path.write_text(json.dumps(config, indent=2))
        env = dict(os.environ)
        if isinstance(unit, EngineUnit):
            side = str(free_port())
            for key, value in unit.env:
                env[key] = "127.0.0.1" if value == HOST_IP_PLACEHOLDER else value
            env["VLLM_NIXL_SIDE_CHANNEL_PORT"] = side
        log = (self.state_dir / f"{unit_name(unit.unit_id)}.log").open("ab")
        proc = subprocess.Popen(
            self.launcher(unit, port, config_path), env=env, stdout=log, stderr=log,
            start_new_session=True,
        )  # fmt: skip
        external_id = f"pid:{proc.pid}:127.0.0.1:{port}"
        record = {"external_id": external_id, "pid": proc.pid, "port": port}
        self._record_path(unit).write_text(json.dumps(record))
        return external_id

    def address(self, unit: Unit, external_id: str) -> str | None:
        _, _, host, port = external_id.split(":")
        return f"{host}:{port}"

    def update_router(self, router: RouterUnit, external_id: str, hosts: dict[str, str]) -> None:
        """Parameters and instance set in place through the router's loopback admin API."""
        url = f"http://{self.address(router, external_id)}"
        push_router_config(self.router_admin, url, router.config(hosts))

    def flip_role(self, router: RouterUnit, router_id: str, unit: EngineUnit) -> None:
        url = f"http://{self.address(router, router_id)}"
        self.router_admin.set_role(url, unit_name(unit.unit_id), str(unit.role))

    def drain(self, unit: Unit, external_id: str) -> None:
        """The router already stopped routing to it; vLLM finishes in-flight work on SIGTERM."""

    def delete(self, unit: Unit, external_id: str) -> None:
        pid = int(external_id.split(":")[1])
        if _alive(pid):
            os.killpg(pid, signal.SIGTERM)  # the process group this target started
            _reap(pid)
        for path in self.state_dir.glob(f"{unit_name(unit.unit_id)}@*.json"):
            if json.loads(path.read_text())["pid"] == pid:
                path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # not our child (a previous run started it) but it exists
    return done == 0


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


@register_target(TargetName.LOCAL)
def _make(out_dir: Path, host_gpus: int = 0, **kwargs: Any) -> LocalTarget:
    return LocalTarget(Path(out_dir) / "local-state", host_gpus, **kwargs)
