"""Run the router: `python -m deploy.router.server router.yaml` (uvicorn, one process).

One process on purpose: FluidPD's in-flight accounting lives in the process's memory.
"""

from __future__ import annotations

import sys
from pathlib import Path

import uvicorn

from deploy.router.app import create_app
from deploy.router.config import load_config


def serve(config_path: Path) -> None:
    """Load and validate the config, then serve until interrupted."""
    config = load_config(config_path)
    uvicorn.run(create_app(config), host=config.listen_host, port=config.listen_port)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m deploy.router.server CONFIG.(json|yaml)")
    serve(Path(sys.argv[1]))
