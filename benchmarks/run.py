"""`make bench`: run every benchmarks/bench_<name>.py and assemble BENCHMARKS.md.

Each bench module exposes `run() -> str`, returning a markdown section that states the
command that produced it, the machine, and figures measured side by side in one run
(ours vs the baseline, medians over repeats). Sections are kept in benchmarks/results/ so
one benchmark can be re-run alone: `python -m benchmarks.run NAME [NAME ...]`.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path

import benchmarks

RESULTS = Path(__file__).parent / "results"
OUTPUT = Path(__file__).parent.parent / "BENCHMARKS.md"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def available() -> list[str]:
    return sorted(
        m.name.removeprefix("bench_")
        for m in pkgutil.iter_modules(benchmarks.__path__)
        if m.name.startswith("bench_")
    )


def run_one(name: str) -> None:
    module = importlib.import_module(f"benchmarks.bench_{name}")
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = module.run()
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.md").write_text(
        f"{body.rstrip()}\n\n_Measured {started} on {machine()}._\n", encoding="utf-8"
    )


def assemble() -> None:
    parts = [
        "# Benchmarks\n",
        "Produced by `make bench` (all) or `python -m benchmarks.run NAME` (one section).",
        "Ratios are measured side by side in one run; times are medians over repeats.\n",
    ]
    for name in available():
        section = RESULTS / f"{name}.md"
        if section.exists():
            parts.append(section.read_text(encoding="utf-8"))
    OUTPUT.write_text("\n".join(parts), encoding="utf-8")


def main(argv: list[str]) -> None:
    for name in argv or available():
        print(f"== bench {name}", flush=True)
        run_one(name)
    assemble()
    print(f"wrote {OUTPUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
