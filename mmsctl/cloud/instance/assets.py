"""What an instance fetches at boot instead of reaching the internet: the plan, then the upload.

The models as given (a local ``.mar`` or folder, packed; a zoo name resolved here, on the user's
machine; ``s3://`` read where it is, with the instance role), this mmsctl as a wheel and a
wheelhouse of its dependencies for the instance's Python (:mod:`~mmsctl.cloud.instance.wheelhouse`).
They go to the account's asset bucket (:mod:`mmsctl.cloud.aws.asset_bucket`) under one prefix
per fleet or instance, each under a key that names its sha256; the boot script's agent fetches them
(``boot-agent.py.txt``), checking the manifest against the sha256 its user data carries and every file against
the manifest, and installs with ``pip --no-index``, so an instance in a private subnet with only an S3 gateway
endpoint boots.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from mmsctl.cloud.aws.asset_bucket import (
    WHEELS,
    Asset,
    bucket_name,
    ensure_bucket,
    manifest_document,
    read_statement,
    sha256_of,
    upload,
)
from mmsctl.cloud.aws.session import AwsSession
from mmsctl.cloud.instance.model_pins import pin_models
from mmsctl.cloud.instance.userdata import AssetsRef, ModelSpec, ScriptPaths
from mmsctl.errors import InputNotFoundError

__all__ = ["AssetPlan", "StagedAssets", "assets_ref", "check_model", "plan_assets", "stage_assets"]

_SUFFIXES = (".mar", ".model", ".tar.gz")


@dataclass
class AssetPlan:
    """The files to upload, the models as the instance names them, and the ``s3://`` models read in place."""

    prefix: str
    assets: list[Asset] = field(default_factory=list)
    models: list[ModelSpec] = field(default_factory=list)
    #: {"uri", "dest"}, and once pinned (:func:`assets_ref`) "region", "style", "size", "version" or "sha256"
    in_place: list[dict[str, Any]] = field(default_factory=list)

    def manifest(self) -> bytes:
        """The manifest document the instance fetches (the same plan, the same bytes)."""
        return manifest_document(self.assets, {"s3": self.in_place})

    @property
    def manifest_sha256(self) -> str:
        return hashlib.sha256(self.manifest()).hexdigest()


@dataclass
class StagedAssets:
    """Where the assets are, and the policy that lets the instance role read exactly them."""

    ref: AssetsRef
    policy: dict[str, Any]
    uploaded: list[str]
    unchanged: list[str]


def check_model(spec: ModelSpec) -> None:
    """Refuse a zoo name nothing could resolve or a local path that is not there, without downloading
    anything: the same check ``serve start`` makes, so a dry run's plan is one a real run can carry out.

    Raises:
        ModelNotFoundError: an unknown zoo name (with a did-you-mean where one is close).
        InputNotFoundError: a local file or folder that is not there.
    """
    if spec.kind == "zoo":
        from mmsctl.zoo.resolve import check_name

        check_name(spec.location)
    elif spec.kind == "path" and not Path(spec.location).expanduser().exists():
        raise InputNotFoundError(f"{spec.location}: no such file or folder", param="models")


def _archive_of(spec: ModelSpec, work: Path, dry_run: bool) -> tuple[Path, str]:
    """A local file to upload for *spec* and its file name on the instance."""
    check_model(spec)
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
            plan.assets.append(_asset(f"{prefix}models/", path, filename, dest, dry_run))
        plan.models.append(ModelSpec(spec.name, f"{on_instance}/{dest}", "path"))
    for wheel in sorted(wheelhouse.glob("*.whl")) if wheelhouse is not None else []:
        plan.assets.append(_asset(WHEELS, wheel, wheel.name, f"wheelhouse/{wheel.name}", False))
    if wheelhouse is None and dry_run:  # a plan does not build the wheels; it shows where they go
        plan.assets.append(Asset(WHEELS + "<sha256>/*.whl", Path("mmsctl and its dependencies, one object per wheel"),
                                 "", "wheelhouse/"))
    return plan


def _asset(folder: str, path: Path, filename: str, dest: str, dry_run: bool) -> Asset:
    """One file under the key ``FOLDER/SHA256/FILE``: a later upload of other bytes never replaces it."""
    if dry_run:
        return Asset(f"{folder}<sha256>/{filename}", path, "<not computed in a dry run>", dest)
    digest = sha256_of(path)
    return Asset(f"{folder}{digest}/{filename}", path, digest, dest, path.stat().st_size)


def assets_ref(aws: AwsSession, plan: AssetPlan, python: str) -> AssetsRef:
    """Pin the plan's ``s3://`` models (region, URL form, version or sha256: read calls), then where the boot
    script fetches from and the sha256 of the manifest it must find there (none in a plan)."""
    if aws.unlooked is None:
        pin_models(aws, plan.in_place, read=not aws.dry_run)
    return AssetsRef(bucket_name(aws.account_id(), aws.region), plan.prefix, aws.region, python,
                     None if aws.dry_run else plan.manifest_sha256)


def stage_assets(aws: AwsSession, plan: AssetPlan, python: str, made: list[str], reused: list[str]) -> StagedAssets:
    """Make the bucket if needed and upload what changed; the reference the boot script fetches from."""
    bucket = ensure_bucket(aws, made, reused)
    uploaded, unchanged = upload(aws, bucket, plan.prefix, plan.assets, plan.manifest())
    policy = read_statement(bucket, plan.prefix, aws.region, [m["uri"] for m in plan.in_place],
                            [m["uri"] for m in plan.in_place if m.get("version")])
    return StagedAssets(AssetsRef(bucket, plan.prefix, aws.region, python, None if aws.dry_run else plan.manifest_sha256),
                        policy, uploaded, unchanged)
