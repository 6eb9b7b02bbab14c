"""What an instance fetches at boot instead of reaching the internet: the plan, then the upload.

The models as given (a local ``.mar`` or folder, packed; a zoo name resolved here, on the user's
machine; ``s3://`` read where it is, with the instance role), this mmsctl as a wheel and a
wheelhouse of its dependencies for the instance's Python (:mod:`~mmsctl.cloud.instance.wheelhouse`).
They go to the account's asset bucket (:mod:`mmsctl.cloud.aws.asset_bucket`) under one prefix
per fleet or instance; the boot script fetches them with ``fetch-assets.py`` and installs with
``pip --no-index``, so an instance in a private subnet with only an S3 gateway endpoint boots.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mmsctl.cloud.aws.asset_bucket import WHEELS, Asset, ensure_bucket, read_statement, sha256_of, upload
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.userdata import AssetsRef, ModelSpec, ScriptPaths

__all__ = ["AssetPlan", "StagedAssets", "plan_assets", "stage_assets"]

_SUFFIXES = (".mar", ".model", ".tar.gz")


@dataclass
class AssetPlan:
    """The files to upload, the models as the instance names them, and the ``s3://`` models read in place."""

    prefix: str
    assets: list[Asset] = field(default_factory=list)
    models: list[ModelSpec] = field(default_factory=list)
    in_place: list[dict[str, str]] = field(default_factory=list)  # {"uri", "key"}


@dataclass
class StagedAssets:
    """Where the assets are, and the policy that lets the instance role read exactly them."""

    ref: AssetsRef
    policy: dict[str, Any]
    uploaded: list[str]
    unchanged: list[str]


def _archive_of(spec: ModelSpec, work: Path, dry_run: bool) -> tuple[Path, str]:
    """A local file to upload for *spec* and its file name on the instance."""
    if dry_run:
        return Path(spec.location), f"{spec.name}.mar"
    if spec.kind == "zoo":
        from mmsctl.zoo import resolve_model

        path = resolve_model(spec.location).path
    else:
        path = Path(spec.location).expanduser()
        if path.is_dir():
            from mmsctl.archive.pack import create_archive

            path = Path(create_archive(path, model_name=spec.name, export_path=work, force=True).path)
    suffix = next((s for s in _SUFFIXES if path.name.endswith(s)), ".mar")
    return path, f"{spec.name}{suffix}"


def plan_assets(models: list[ModelSpec], prefix: str, *, wheelhouse: Optional[Path], dry_run: bool = False,
                paths: ScriptPaths = ScriptPaths()) -> AssetPlan:
    """The plan for *models* and the *wheelhouse* (None in a dry run: it is not built for a plan)."""
    plan = AssetPlan(prefix)
    work = Path(tempfile.mkdtemp(prefix="mmsctl-assets-"))
    on_instance = f"{paths.app_dir}/assets"
    for spec in models:
        if spec.kind == "url":
            plan.models.append(spec)
            continue
        if spec.kind == "s3":
            dest = f"models/{spec.name}{next((s for s in _SUFFIXES if spec.location.endswith(s)), '.mar')}"
            plan.in_place.append({"uri": spec.location, "dest": dest})
        else:
            path, filename = _archive_of(spec, work, dry_run)
            dest = f"models/{filename}"
            plan.assets.append(Asset(prefix + dest, path, "<not computed in a dry run>" if dry_run else sha256_of(path),
                                     dest))
        plan.models.append(ModelSpec(spec.name, f"{on_instance}/{dest}", "path"))
    for wheel in sorted(wheelhouse.glob("*.whl")) if wheelhouse is not None else []:
        plan.assets.append(Asset(WHEELS + wheel.name, wheel, sha256_of(wheel), f"wheelhouse/{wheel.name}"))
    if wheelhouse is None and dry_run:  # a plan does not build the wheels; it shows where they go
        plan.assets.append(Asset(WHEELS + "*.whl", Path("mmsctl and its dependencies, one object per wheel"), "",
                                 "wheelhouse/"))
    return plan


def stage_assets(aws: AwsSession, plan: AssetPlan, python: str, made: list[str], reused: list[str]) -> StagedAssets:
    """Make the bucket if needed and upload what changed; the reference the boot script fetches from."""
    bucket = ensure_bucket(aws, made, reused)
    uploaded, unchanged = upload(aws, bucket, plan.prefix, plan.assets, {"s3": plan.in_place})
    policy = read_statement(bucket, plan.prefix, aws.region, [m["uri"] for m in plan.in_place])
    return StagedAssets(AssetsRef(bucket, plan.prefix, aws.region, python), policy, uploaded, unchanged)
