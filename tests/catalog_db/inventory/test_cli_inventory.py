"""`coral inventory snapshot|show|list` through the real CLI app."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from flows.cli.main import app


def test_snapshot_show_list(catalog_path: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    db = ["--db", str(catalog_path)]
    made = runner.invoke(
        app,
        [
            *db,
            "inventory",
            "snapshot",
            "--source",
            "catalog",
            "--count",
            "2",
            "--regions",
            "us-east-1,us-west-2",
            "-f",
            "json",
        ],
    )
    assert made.exit_code == 0, made.output
    row = json.loads(made.stdout)[0]
    assert row["status"] == "ok" and row["items"] > 0

    shown = runner.invoke(app, [*db, "inventory", "show", "-f", "json"])
    assert shown.exit_code == 0, shown.output
    rows = json.loads(shown.stdout)
    assert len(rows) == row["items"]
    assert {r["region"] for r in rows} == {"us-east-1", "us-west-2"}
    assert all(r["available_count"] == 2 for r in rows)

    bad = tmp_path / "bad.csv"
    bad.write_text("instance_type,region,count,price_usd_per_hr\nx,lab,-3,1.0\n")
    failed = runner.invoke(
        app, [*db, "inventory", "snapshot", "--source", "file", "--file", str(bad)]
    )
    assert failed.exit_code == 1
    assert "bad.csv:2: field 'count'" in failed.output

    listed = runner.invoke(app, [*db, "inventory", "list", "-f", "json"])
    assert [r["status"] for r in json.loads(listed.stdout)] == ["failed", "ok"]
    missing = runner.invoke(app, [*db, "inventory", "show", "--snapshot", "nope"])
    assert missing.exit_code == 1
