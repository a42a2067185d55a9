"""`coral deploy`: prints the diff first; --dry-run applies nothing; bad plans exit 2."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from catalog_db.connection import read_connection
from flows.cli.main import app
from tests.deploy import plan_rows


def test_deploy_cli_diff_dry_run_and_apply(catalog_path: Path, tmp_path: Path) -> None:
    plan_rows.insert_pd_pair(catalog_path, "plan-a")
    runner = CliRunner()
    base = ["--db", str(catalog_path), "deploy", "--plan", "plan-a", "--out", str(tmp_path)]
    preview = runner.invoke(app, [*base, "--target", "kubernetes", "--dry-run"])
    assert preview.exit_code == 0, preview.output
    assert "3 action(s)" in preview.output and "create" in preview.output
    assert (tmp_path / "plan-a.preview" / "kubernetes.yaml").exists()
    with read_connection(catalog_path) as con:
        assert con.execute("SELECT count(*) FROM deployments").fetchone() == (0,)
    applied = runner.invoke(app, [*base, "--target", "dry-run"])
    assert applied.exit_code == 0, applied.output
    assert "plan-a.dry-run.1: active" in applied.output
    missing = runner.invoke(app, ["--db", str(catalog_path), "deploy", "--plan", "nope"])
    assert missing.exit_code == 2 and "not found" in missing.output
