"""`coral profile` and `coral profile show` through the real CLI on a real catalog."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from catalog_db.connection import read_connection
from catalog_db.profiles import read_points
from flows.cli.main import app


def test_profile_then_show(catalog_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["--db", str(catalog_path), "profile", "--models",
                                 "Qwen/Qwen3-8B", "--gpus", "L4,T4", "--backend", "analytic",
                                 "--workers", "1"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "points written" in result.output
    with read_connection(catalog_path) as con:
        points = read_points(con, model="Qwen/Qwen3-8B")
    assert {p.gpu_type for p in points} == {"L4", "T4"}
    shown = runner.invoke(app, ["--db", str(catalog_path), "profile", "show", "Qwen/Qwen3-8B",
                                "L4", "--phase", "decode", "--format", "csv"])  # fmt: skip
    assert shown.exit_code == 0, shown.output
    header = shown.output.splitlines()[0]
    assert header.startswith("phase,tp,layers,backend,batch") and "8192 tok (ms)" in header


def test_bad_gpu_is_an_error_naming_it(catalog_path: Path) -> None:
    result = CliRunner().invoke(app, ["--db", str(catalog_path), "profile", "--models",
                                      "Qwen/Qwen3-8B", "--gpus", "H999"])  # fmt: skip
    assert result.exit_code == 2 and "H999" in result.output
