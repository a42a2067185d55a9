"""prefect.yaml (work pools) names the same flows and schedules as `coral serve`."""

import importlib
from pathlib import Path

import yaml

from flows.deployments import build_deployments
from flows.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def test_prefect_yaml_entrypoints_resolve_to_the_served_flows(tmp_path: Path) -> None:
    spec = yaml.safe_load((ROOT / "prefect.yaml").read_text())
    served = {d.flow_name: d for d in build_deployments(Settings(db=tmp_path / "c.duckdb"))}
    flows = {}
    for deployment in spec["deployments"]:
        path, name = deployment["entrypoint"].split(":")
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        flows[getattr(module, name).name] = deployment
    assert set(flows) == set(served)
    for flow_name, deployment in flows.items():
        crons = [s["cron"] for s in deployment.get("schedules", []) if "cron" in s]
        served_crons = [
            s.schedule.cron for s in served[flow_name].schedules if hasattr(s.schedule, "cron")
        ]
        assert crons == served_crons
        assert deployment["work_pool"]["name"].startswith("coral-")
