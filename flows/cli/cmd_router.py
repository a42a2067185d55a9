"""`coral router CONFIG`: run the live FluidPD P/D router in front of vLLM engines.

The config (JSON or YAML, `deploy.router.config`) names the engines, SLOs, perf model and the
FluidPD elasticity parameters; the router binds to its `listen_host:listen_port`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from deploy.router.server import serve


def router(
    config: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="router config (JSON or YAML)")
    ],
) -> None:
    """Serve the FluidPD router (blocks until interrupted)."""
    serve(config)


def register(app: typer.Typer) -> None:
    app.command()(router)
