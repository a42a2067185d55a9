import json
from pathlib import Path

from typer.testing import CliRunner

from catalog_db.connection import read_connection
from catalog_db.templates_io import current_templates
from flows.cli.main import app
from tests.catalog_db.test_templates_io import LARGE, SMALL, _seed_profiles

runner = CliRunner()


def test_build_list_show(catalog_path: Path) -> None:
    _seed_profiles(catalog_path)
    db = ["--db", str(catalog_path)]
    result = runner.invoke(app, [*db, "templates", "build"])
    assert result.exit_code == 0, result.output
    assert "new current set" in result.output and "kept" in result.output
    with read_connection(catalog_path) as con:
        stored = current_templates(con)
    listed = runner.invoke(app, [*db, "templates", "list", "-m", LARGE, "-f", "json"])
    assert listed.exit_code == 0, listed.output
    records = json.loads(listed.stdout)
    assert len(records) == sum(t.model == LARGE for t in stored)
    assert all(r["usd_per_million_tokens"] is not None for r in records)
    shown = runner.invoke(app, [*db, "templates", "show", SMALL, "-f", "json"])
    assert shown.exit_code == 0, shown.output
    assert {r["template_id"] for r in json.loads(shown.stdout)} == {
        t.template_id for t in stored if t.model == SMALL
    }
    again = runner.invoke(app, [*db, "templates", "build"])
    assert "unchanged" in again.output


def test_errors_name_the_model(catalog_path: Path) -> None:
    db = ["--db", str(catalog_path)]
    result = runner.invoke(app, [*db, "templates", "build", "-m", "no/such"])
    assert result.exit_code == 1 and "no/such" in result.output
    result = runner.invoke(app, [*db, "templates", "build"])
    assert result.exit_code == 1 and "no profiles" in result.output
    result = runner.invoke(app, [*db, "templates", "show", "Qwen/Qwen3-8B"])
    assert result.exit_code == 1 and "no templates" in result.output
    result = runner.invoke(app, [*db, "templates", "show", "no/such"])
    assert result.exit_code == 1 and "unknown model" in result.output
