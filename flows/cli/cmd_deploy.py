"""`coral deploy --plan ID --target kubernetes|ec2|local|dry-run [--dry-run] [--out DIR]`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import boto3
import typer
from rich.console import Console

from catalog_db.connection import CatalogBusyError
from catalog_db.deploy_io import PlanNotDeployableError, PlanNotFoundError
from deploy.render.render_plan import RenderError
from deploy.rollout import http_health_checker, prepare, rollout
from deploy.targets.base_target import (
    DeployTarget,
    TargetCannotProvideError,
    TargetName,
    make_target,
)
from flows.cli.output import OutputFormat, print_rows
from flows.settings import Settings

err = Console(stderr=True)


def _target(settings: Settings, name: TargetName, out: Path, ami: str | None, gpus: int) -> Any:
    if name is TargetName.EC2:
        if not ami:
            raise typer.BadParameter("--ami is required for the ec2 target")

        def client(region: str) -> Any:
            return boto3.client("ec2", region_name=region, endpoint_url=settings.aws_endpoint_url)

        return make_target(name, client_for_region=client, image_id=ami)
    if name is TargetName.LOCAL:
        return make_target(name, out_dir=out, host_gpus=gpus)
    return make_target(name, out_dir=out)


def deploy(
    ctx: typer.Context,
    plan: Annotated[str, typer.Option("--plan", help="plan id to roll out")],
    target: Annotated[TargetName, typer.Option("--target", help="where to deploy")] = (
        TargetName.DRY_RUN
    ),
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="print the diff, apply nothing")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="rendered files (default out/deploy)")
    ] = None,
    ami: Annotated[str | None, typer.Option("--ami", help="EC2 image with Docker + NVIDIA")] = None,
    host_gpus: Annotated[int, typer.Option("--host-gpus", help="local target: GPUs here")] = 0,
) -> None:
    """Render a plan into vLLM P/D deployments, print the diff, then roll it out."""
    settings: Settings = ctx.obj
    out_dir = out or settings.out_dir / "deploy"
    try:
        chosen: DeployTarget = _target(settings, target, out_dir, ami, host_gpus)
        prepared = prepare(settings.db, plan, chosen)
        rows = [(a.kind, a.unit_kind, a.unit_id, a.detail) for a in prepared.diff.actions]
        print_rows(["action", "kind", "unit", "detail"], rows, OutputFormat.TABLE,
                   title=f"plan {plan} on {target}: {len(rows)} action(s)")  # fmt: skip
        if dry_run:
            written = chosen.write_files(prepared.spec, out_dir / f"{plan}.preview")
            typer.echo(f"dry run: nothing applied; {len(written)} file(s) in {out_dir}")
            return
        checker = None if target is TargetName.DRY_RUN else http_health_checker()
        result = rollout(settings.db, plan, chosen, out_dir, checker)
    except (PlanNotFoundError, PlanNotDeployableError, RenderError, TargetCannotProvideError,
            FileNotFoundError, CatalogBusyError) as error:  # fmt: skip
        err.print(f"[red]not deployed:[/red] {error}")
        raise typer.Exit(2) from None
    typer.echo(
        f"deployment {result.deployment_id}: {result.status} ({result.message}); "
        f"{len(result.executed)} applied, {len(result.skipped)} already done"
    )
    if result.status not in ("active", "unchanged"):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(deploy)
