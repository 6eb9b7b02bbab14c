"""``mmsctl lambda build``: a container-image build context for AWS Lambda and SageMaker, and pushing it to ECR.

Why an image and not a zip: mxnet 1.9.1 and numpy unpacked are well over the 250 MB a
zip package may hold; an image may be 10 GB. One image serves both: Lambda runs it with its
``CMD`` (the handler), SageMaker with ``serve`` (the embedded server's inference API); the
ENTRYPOINT (``entrypoint.sh``) tells them apart. The context::

    Dockerfile            on public.ecr.aws/lambda/python:3.11 (the runtime interface client inside)
    entrypoint.sh         ``serve``: SageMaker's entry (python -m mmsctl.sagemaker serve); else Lambda's own
    requirements.txt      what the handler and ``serve`` import (mxnet, numpy, Pillow, httpx, boto3, aiohttp, …),
                          pinned with hashes (requirements-lambda.txt beside this module;
                          scripts/lock_lambda_requirements.py)
    task/mmsctl/          this mmsctl, copied: the very code `mmsctl lambda run-local` runs
    model/                the model, baked in (absent when it loads from s3://bucket/key at start)
    mmsctl-lambda.json    what the image is: handler, environment, model, base image

``--push`` builds with docker or podman and pushes to the ECR repository
``mmsctl-lambda/NAME`` (created, tagged, with a pull policy for function NAME).
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from mmsctl.cloud.aws.errors import ContainerToolError
from mmsctl.cloud.lambda_ import env
from mmsctl.cloud.lambda_.manifest import MANIFEST, BuildContext, StaleBuildContext
from mmsctl.cloud.lambda_.repository import ensure_repository
from mmsctl.cloud.lambda_.spec import check_function_name, repository_name
from mmsctl.errors import UsageError

__all__ = [
    "BASE_IMAGE",
    "BuildContext",
    "ContainerTool",
    "MANIFEST",
    "StaleBuildContext",
    "dockerfile_text",
    "entrypoint_text",
    "find_container_tool",
    "push_image",
    "requirements",
    "write_build_context",
]


BASE_IMAGE = "public.ecr.aws/lambda/python:3.11"
IMAGE_CACHE_DIR = "/opt/mmsctl/cache"
PLATFORM = "linux/amd64"  # mxnet 1.9.1 publishes x86_64 wheels only
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo")


LOCK_FILE = Path(__file__).with_name("requirements-lambda.txt")
#: The base image's own entry point (the runtime interface client, or the emulator outside Lambda).
LAMBDA_ENTRYPOINT = "/lambda-entrypoint.sh"
ENTRYPOINT = "/opt/mmsctl/entrypoint.sh"


def entrypoint_text() -> str:
    """The image's ENTRYPOINT: ``docker run IMAGE serve`` (SageMaker) starts the server; anything else (Lambda's
    ``CMD``, the handler) goes to the base image's entry point, as without this script."""
    return "\n".join([
        "#!/bin/sh",
        "# Written by `mmsctl lambda build`. SageMaker runs `docker run IMAGE serve`; Lambda runs the image with",
        "# its CMD (the handler), which the base image's own entry point hands to the runtime interface client.",
        'if [ "$1" = "serve" ]; then',
        '    export PYTHONPATH="${LAMBDA_TASK_ROOT:-/var/task}${PYTHONPATH:+:$PYTHONPATH}"',
        f'    exec python3 -m {env.SAGEMAKER_SERVE} "$@"',
        "fi",
        f'exec {LAMBDA_ENTRYPOINT} "$@"',
    ]) + "\n"


def requirements() -> list[str]:
    """The image's requirements file, line by line: the handler's dependencies only (no terminal UI, server
    or load generator), each pinned with its wheel's sha256 for the Lambda platform, so builds repeat."""
    return LOCK_FILE.read_text(encoding="utf-8").splitlines()


def dockerfile_text(ctx: BuildContext) -> str:
    """The Dockerfile of *ctx*: AWS's documented layout for the Python base image, plus the model."""
    lines = [
        f"# Built by `mmsctl lambda build` (mmsctl {ctx.mmsctl_version}) for model {ctx.model}.",
        f"# Build and push: docker buildx build --platform {PLATFORM} --provenance=false -t IMAGE_URI .",
        "#   (or: mmsctl lambda build MODEL --push --name NAME)",
        f"FROM {ctx.base_image}",
        "",
        "# What the handler and SageMaker's `serve` import, pinned with hashes: mxnet 1.9.1 with numpy<2 (unpacked",
        "# they exceed a zip package's 250 MB), Pillow, httpx, boto3, aiohttp. A build today installs the very",
        "# wheels of the last one.",
        "COPY requirements.txt ${LAMBDA_TASK_ROOT}/requirements.txt",
        "RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r ${LAMBDA_TASK_ROOT}/requirements.txt",
        "",
        "# mmsctl itself: the handler code that `mmsctl lambda run-local` runs.",
        "COPY task/ ${LAMBDA_TASK_ROOT}/",
    ]
    if ctx.baked:
        lines += ["", "# The model, baked into the image.", f"COPY model/ {env.IMAGE_MODEL_DIR}/"]
    env_lines = [f"{k}={v}" for k, v in ctx.env.items()]
    lines += ["", "ENV " + " \\\n    ".join(env_lines)]
    lines += [
        "",
        "# Check that mxnet imports in the image" + (" and that the model loads." if ctx.baked else "."),
        f"RUN python -m {env.PREPARE}",
        "",
        "# `docker run IMAGE serve` (SageMaker: /ping and /invocations on 8080); otherwise Lambda's entry point.",
        f"COPY entrypoint.sh {ENTRYPOINT}",
        f'ENTRYPOINT ["/bin/sh", "{ENTRYPOINT}"]',
        f'CMD ["{ctx.handler}"]',
    ]
    return "\n".join(lines) + "\n"


def _bake(model: str, target: Path) -> str:
    """Put MODEL (zoo name, archive, folder) into *target* as a folder the handler opens in place; its name."""
    from mmsctl.archive import extract_archive
    from mmsctl.zoo import resolve_model

    resolved = resolve_model(model, progress=False)
    source = Path(resolved.path)
    if source.is_dir():
        shutil.copytree(source, target, ignore=_IGNORE)
    else:
        extract_archive(source, target)
    return resolved.name


def write_build_context(model: str, out: Path, *, model_version: Optional[str] = None, force: bool = False,
                        base_image: str = BASE_IMAGE) -> BuildContext:
    """Write the build context for MODEL into *out*.

    Args:
        model: a zoo name, archive or folder (baked into the image), or ``s3://bucket/key`` (loaded at start).
        out: the folder to write (refused if it holds anything, unless *force*).
        model_version: pin this S3 object version (``s3://`` models only).
        force: replace what *out* holds.

    Raises:
        UsageError: *out* is not empty, or a version for a model that is not in S3.
        ModelNotFoundError, ArchiveError: MODEL cannot be found or read.
    """
    import mmsctl

    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        if not force:
            raise UsageError(f"{out} is not empty", param="out", hint="replace it (force), or write to another folder")
        if not (out / MANIFEST).is_file() and any(out.iterdir()):
            raise UsageError(f"{out} holds files that are not a build context; refusing to replace them")
        shutil.rmtree(out)
    baked = not model.startswith("s3://")
    if model_version and baked:
        raise UsageError("a model version pins an S3 object version: MODEL must be s3://bucket/key",
                         param="model_version")
    variables: dict[str, str] = {}
    staging = out.with_name(f".{out.name}.tmp")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        if baked:
            _bake(model, staging / "model")
            location = env.IMAGE_MODEL_DIR
            variables[env.ENV_MODEL] = location
        else:
            where = env.parse_s3_uri(model, model_version)
            location = f"s3://{where.bucket}/{where.key}"
            variables[env.ENV_MODEL] = location
            if where.version_id:
                variables[env.ENV_MODEL_VERSION] = where.version_id
            model_version = where.version_id
        variables.update({"MMSCTL_CACHE_DIR": IMAGE_CACHE_DIR, "MMSCTL_OFFLINE": "1"})
        shutil.copytree(Path(mmsctl.__file__).parent, staging / "task" / "mmsctl", ignore=_IGNORE)
        ctx = BuildContext(out, env.HANDLER, base_image, model, location, model_version, baked, variables,
                           requirements(), mmsctl.__version__)
        (staging / "requirements.txt").write_text("\n".join(ctx.requirements) + "\n", encoding="utf-8")
        (staging / "Dockerfile").write_text(dockerfile_text(ctx), encoding="utf-8")
        (staging / "entrypoint.sh").write_text(entrypoint_text(), encoding="utf-8")
        (staging / "entrypoint.sh").chmod(0o755)
        (staging / ".dockerignore").write_text("**/__pycache__\n**/*.pyc\n", encoding="utf-8")
        manifest = {k: v for k, v in ctx.to_dict().items() if k != "path"}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return ctx


# -- pushing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerTool:
    name: str  # docker | podman
    path: str


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def find_container_tool(*, which: Callable[[str], Optional[str]] = shutil.which,
                        run: Runner = subprocess.run) -> ContainerTool:
    """docker (or podman) with a daemon that answers.

    Raises:
        ContainerToolError: neither is installed, or the daemon is not running.
    """
    problems = []
    for name in ("docker", "podman"):
        path = which(name)
        if path is None:
            continue
        try:
            probe = run([path, "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as exc:
            problems.append(f"{name}: {exc}")
            continue
        if probe.returncode == 0:
            return ContainerTool(name, path)
        reason = next((ln.strip() for ln in (probe.stderr or probe.stdout or "").splitlines() if ln.strip()),
                      f"`{name} info` exited {probe.returncode}")
        problems.append(f"{name} is installed but its daemon is not running ({reason})")
    if not problems:
        raise ContainerToolError("pushing an image needs docker or podman, and neither is installed", param="push",
                                 hint="install one, or build and push the context yourself (see its Dockerfile)")
    raise ContainerToolError("; ".join(problems),
                             hint="start the daemon (sudo systemctl start docker), or build the context elsewhere: "
                                  f"docker buildx build --platform {PLATFORM} --provenance=false -t IMAGE_URI DIR")


def push_commands(tool: ContainerTool, context: Path, image: str, registry: str) -> list[list[str]]:
    """The commands ``--push`` runs (the registry password goes to ``login`` on stdin, never in argv)."""
    login = [tool.path, "login", "--username", "AWS", "--password-stdin", registry]
    if tool.name == "docker":
        build = [tool.path, "buildx", "build", "--platform", PLATFORM, "--provenance=false", "--load", "-t", image,
                 str(context)]
    else:
        build = [tool.path, "build", "--platform", PLATFORM, "--format", "docker", "-t", image, str(context)]
    return [login, build, [tool.path, "push", image]]


def push_image(aws: Any, ctx: BuildContext, name: str, *, tag: str = "latest", tool: Optional[ContainerTool] = None,
               run: Runner = subprocess.run) -> dict[str, Any]:
    """Build the context, push it to ``mmsctl-lambda/NAME:TAG``; the image URI and digest.

    The container tool is checked before any AWS call.

    Raises:
        ContainerToolError: no usable docker/podman, or a build/push command failed.
        CloudError: ECR refused.
    """
    check_function_name(name)
    tool = tool or find_container_tool(run=run)
    action, repo_uri = ensure_repository(aws, name)
    token = aws.call("ecr", "get_authorization_token")["authorizationData"][0]
    registry = str(token.get("proxyEndpoint", repo_uri.split("/", 1)[0])).removeprefix("https://")
    image = f"{repo_uri}:{tag}"
    commands = push_commands(tool, ctx.path, image, registry)
    if aws.dry_run:
        return {"image": image, "repository": action, "commands": [" ".join(c) for c in commands], "digest": None}
    password = base64.b64decode(token["authorizationToken"]).decode("utf-8").split(":", 1)[1]
    for i, command in enumerate(commands):
        done = run(command, input=password if i == 0 else None, capture_output=i == 0, text=True)
        if done.returncode != 0:
            detail = (done.stderr or "").strip().splitlines()[-1:] if i == 0 else []
            raise ContainerToolError(f"`{' '.join(command[:3])} …` failed (exit {done.returncode})"
                                     + (f": {detail[0]}" if detail else ""))
    described = aws.call("ecr", "describe_images", repositoryName=repository_name(name), imageIds=[{"imageTag": tag}])
    digest = described["imageDetails"][0]["imageDigest"]
    return {"image": image, "repository": action, "digest": digest,
            "pinned": f"{image.rsplit(':', 1)[0]}@{digest}", "commands": [" ".join(c) for c in commands]}
