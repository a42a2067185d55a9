from datetime import timedelta

from flows.deployments import Schedules, build_deployments
from flows.settings import Settings


def _by_flow(settings: Settings) -> dict:
    return {d.flow_name: d for d in build_deployments(settings)}


def test_every_flow_is_served_with_its_schedule(tmp_path) -> None:
    deployments = _by_flow(Settings(db=tmp_path / "c.duckdb"))
    assert set(deployments) == {"nightly-profiling", "replan", "rollout", "cost-report"}
    nightly = deployments["nightly-profiling"].schedules[0].schedule
    assert (nightly.cron, nightly.timezone) == ("0 2 * * *", "UTC")
    assert deployments["replan"].schedules[0].schedule.interval == timedelta(minutes=15)
    assert deployments["cost-report"].schedules[0].schedule.cron == "0 6 * * *"
    assert deployments["rollout"].schedules == []


def test_schedules_are_configurable(tmp_path) -> None:
    custom = Schedules(profiling_cron="30 3 * * *", replan_interval_s=300)
    deployments = {
        d.flow_name: d for d in build_deployments(Settings(db=tmp_path / "c.duckdb"), custom)
    }
    assert deployments["nightly-profiling"].schedules[0].schedule.cron == "30 3 * * *"
    assert deployments["replan"].schedules[0].schedule.interval == timedelta(minutes=5)


def test_parameter_schemas_expose_typed_settings(tmp_path) -> None:
    deployments = _by_flow(Settings(db=tmp_path / "c.duckdb", solver="highs"))
    replan = deployments["replan"]
    schema = replan._parameter_openapi_schema.model_dump()
    params = schema["definitions"]["ReplanParams"]["properties"]
    assert {
        "mode",
        "regions",
        "inventory_source",
        "workload_source",
        "churn_penalty_usd_per_hr",
        "auto_rollout",
        "target",
    } <= set(params)
    assert params["total_rate_req_per_s"]["exclusiveMinimum"] == 0
    assert replan.parameters["params"]["solver"] == "highs"
    assert replan.parameters["params"]["db"] == str(tmp_path / "c.duckdb")
    nightly = deployments["nightly-profiling"]._parameter_openapi_schema.model_dump()
    assert nightly["properties"]["backend"]["enum"] == ["auto", "aic", "analytic", "vllm"]
