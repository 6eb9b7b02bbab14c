"""The boot script that installs the model server and starts it with the given models under systemd.

The script is plain, readable bash (``mmsctl ec2 user-data`` prints it); the
template is ``userdata.sh`` beside this module, filled with ``@@{name}``
markers so shell ``${VARS}`` stay untouched. Model arguments are shell-quoted
once, into ``/opt/mmsctl/run-server.sh``, which systemd runs without
re-parsing them.

It carries the agent (``boot-agent.py.txt``, standard-library Python, compressed: EC2 takes 16 KB of user
data) and its settings (``boot.json``: the readiness URL, the lifecycle hook, the assets and their manifest's
sha256). The agent fetches the assets, and at this and every later boot (``mmsctl-ready.service``) waits
until the server is ready and reports the boot: the instance's ``mmsctl:boot`` tag, the hook's CONTINUE; a
step that fails is reported with its last log line and ABANDONs the hook.
"""

from __future__ import annotations

import ast
import base64
import gzip
import json
import re
import shlex
import string
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Optional
from urllib.parse import urlparse

from mmsctl.errors import UsageError
from mmsctl.names import model_location

__all__ = ["AGENT", "EC2_USER_DATA_LIMIT", "agent_source", "READY_PATHS", "READY_WAIT_S", "LifecycleHook", "MmsNeedsArchiveUrl",
           "ModelSpec", "UserDataSpec", "parse_models", "render_user_data", "server_kind"]

ServerKind = Literal["mmsctl", "mms"]
SERVERS: tuple[ServerKind, ...] = ("mmsctl", "mms")
_TEMPLATE = Path(__file__).with_name("userdata.sh")
#: The agent the boot script installs (a standard-library script for the instance, not a module of mmsctl).
AGENT = Path(__file__).with_name("boot-agent.py.txt")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ZOO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
MMS_VERSION = "1.1.11"
EC2_USER_DATA_LIMIT = 16 * 1024  # RunInstances refuses more (before base64)
#: What "ready" means to each server, asked on the instance before its boot is reported: the mmsctl server answers
#: 200 only when every model it serves has a READY worker; MMS 1.1.11 answers /ping whenever its front end runs.
READY_PATHS: dict[str, str] = {"mmsctl": "/v2/health/ready", "mms": "/ping"}
#: How long the agent waits for the server at each boot before it reports the boot failed.
READY_WAIT_S = 900


def server_kind(value: str) -> ServerKind:
    """A server kind checked (a usage error before any AWS call or credential check)."""
    for kind in SERVERS:
        if value == kind:
            return kind
    raise UsageError(f"unknown server {value!r}; choose one of: {', '.join(SERVERS)}", param="server")


class MmsNeedsArchiveUrl(UsageError):
    """MMS cannot resolve zoo names: it needs an archive URL (the mmsctl server resolves them itself)."""

    reference = "mms-needs-archive-url"


class _Template(string.Template):
    delimiter = "@@"


@dataclass(frozen=True)
class ModelSpec:
    """One model to serve, ``name=location``: a zoo name, an http(s) URL, a local file or folder, or ``s3://``.

    Local files, folders, zoo names and ``s3://`` reach the instance through its assets
    (:mod:`mmsctl.cloud.instance.assets`); an http(s) URL is fetched by the instance itself.
    """

    name: str
    location: str
    kind: str = "zoo"  # zoo | url | path | s3

    @property
    def arg(self) -> str:
        return f"{self.name}={self.location}"


def parse_models(values: list[str]) -> list[ModelSpec]:
    """``["squeezenet", "r18=https://…/resnet-18.mar", "./mine.mar", "s3://b/k.mar"]`` -> checked specs."""
    specs: list[ModelSpec] = []
    for value in values:
        for item in (v for v in value.split(",") if v.strip()) if "://" not in value else [value]:
            item = item.strip()
            where = model_location(item)
            location = where.value
            name = where.name or _default_name(item)
            if any(ch.isspace() or ord(ch) < 32 for ch in item):
                raise UsageError(f"model {item!r}: spaces and control characters are not allowed", param="models")
            scheme = urlparse(location).scheme
            kind = "s3" if scheme == "s3" else where.kind
            if kind == "s3" and not urlparse(location).netloc or kind == "s3" and not urlparse(location).path.strip("/"):
                raise UsageError(f"model {item!r}: an S3 model is s3://bucket/key", param="models")
            if kind == "zoo" and not _ZOO_RE.match(location):
                raise UsageError(f"model {item!r}: not a zoo name, a file, an http(s) or s3:// URL", param="models")
            if not _NAME_RE.match(name):
                raise UsageError(f"model {item!r}: model name must be letters, digits, '.', '_' or '-'",
                                 param="models")
            specs.append(ModelSpec(name, location, kind))
    names = [s.name for s in specs]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise UsageError(f"model name given twice: {', '.join(dupes)}", param="models")
    return specs


def _default_name(location: str) -> str:
    if "://" in location or "/" in location or location.endswith((".mar", ".model")):
        stem = Path(urlparse(location).path if "://" in location else location).name
        for suffix in (".mar", ".model", ".tar.gz"):
            if stem.endswith(suffix):
                stem = stem[: -len(suffix)]
        return stem or "model"
    return location


@dataclass(frozen=True)
class ScriptPaths:
    """Where the boot script puts things: the instance's defaults; a test runs it in a throw-away prefix."""

    app_dir: str = "/opt/mmsctl"
    data_dir: str = "/var/lib/mmsctl"
    conf_dir: str = "/etc/mmsctl"
    unit_dir: str = "/etc/systemd/system"
    log_file: str = "/var/log/mmsctl-init.log"
    console: str = "/dev/console"
    service_user: str = "mmsctl"


@dataclass(frozen=True)
class AssetsRef:
    """Where the instance's assets are (``s3://bucket/prefix``), and the sha256 of the manifest that lists them
    (the agent refuses any other manifest; None: not known, so nothing is fetched)."""

    bucket: str
    prefix: str
    region: str
    python: str = "3.10"  # the wheelhouse's Python: the AMI's python3 must be this one
    manifest_sha256: Optional[str] = None


@dataclass(frozen=True)
class LifecycleHook:
    """The Auto Scaling group and ``EC2_INSTANCE_LAUNCHING`` hook an instance completes once its server is ready.

    A fleet's instances are held in ``Pending:Wait`` (``Warmed:Pending:Wait`` for a warm pool) until the
    boot completes the action; an instance that is not a fleet member (``ec2 launch``) has none.
    """

    group: str
    name: str


@dataclass(frozen=True)
class UserDataSpec:
    """Everything the boot script needs."""

    models: list[ModelSpec] = field(default_factory=list)
    server: ServerKind = "mmsctl"
    accelerator: str = "none"
    version: str = ""
    pip_spec: Optional[str] = None  # what `pip install` gets for the mmsctl server; default mmsctl==<version>
    inference_port: int = 8080
    management_port: int = 8081
    #: Where the management API listens: loopback for `ec2 launch` (reached through SSH), every
    #: interface for a fleet (fan-out reaches members' private addresses; the security group
    #: admits only the fleet's admin group).
    management_host: str = "127.0.0.1"
    #: Install from these assets (no package index); None: pip from the index (``pip_spec``, MMS).
    assets: Optional[AssetsRef] = None
    #: The fleet's launching hook, completed at every boot once the server is ready (None: not a fleet member).
    lifecycle_hook: Optional[LifecycleHook] = None
    paths: ScriptPaths = field(default_factory=ScriptPaths)
    #: Tests only: the agent's AWS endpoints on loopback (``s3``, ``imds``, ``autoscaling``, ``ec2``).
    test_endpoints: tuple[tuple[str, str], ...] = ()


def render_user_data(spec: UserDataSpec) -> str:
    """The boot script for *spec*, ready for RunInstances ``UserData`` (boto3 base64-encodes it).

    Raises:
        UsageError: models the server cannot load, or a script over EC2's 16 KB.
    """
    from mmsctl import __version__

    version = spec.version or __version__
    _check_server(spec)
    server = _mms_part(spec) if spec.server == "mms" else _mmsctl_part(spec, version)
    java = spec.server == "mms"
    paths = spec.paths
    hook = spec.lifecycle_hook
    text = _Template(_TEMPLATE.read_text(encoding="utf-8")).substitute(
        app_dir=shlex.quote(paths.app_dir), data_dir=shlex.quote(paths.data_dir), conf_dir=shlex.quote(paths.conf_dir),
        unit_dir=shlex.quote(paths.unit_dir), log_file=shlex.quote(paths.log_file),
        console=shlex.quote(paths.console), service_user=shlex.quote(paths.service_user),
        java_check=" && command -v java >/dev/null" if java else "",
        hook_note=(f", and Auto Scaling's lifecycle action\n# (hook {hook.name} of group {hook.group}): CONTINUE, "
                   "or ABANDON when a step fails" if hook else ""),
        endpoints="".join(f"export MMSCTL_{k.upper()}_ENDPOINT={shlex.quote(v)}\n" for k, v in spec.test_endpoints),
        ready_environment="".join(f"Environment=MMSCTL_{k.upper()}_ENDPOINT={v}\n" for k, v in spec.test_endpoints),
        boot_json=json.dumps(_boot_settings(spec), sort_keys=True), agent=_agent_blob(),
        python_check=_python_check(spec.assets),
        fetch_assets=_fetch_part(spec.assets),
        pip_install=_pip_part(spec, server.pip_requirements),
        server_label=server.label,
        model_list=", ".join(m.name for m in spec.models) or "(no models; register them later)",
        accelerator=spec.accelerator,
        version=version,
        accelerator_note=_accelerator_note(spec.accelerator),
        java_comment=" and Java 17 for MMS" if java else "",
        apt_java=" openjdk-17-jre-headless" if java else "",
        dnf_java=" java-17-amazon-corretto-headless" if java else "",
        server_config=server.config,
        exec_line=server.exec_line,
    )
    if len(text.encode()) > EC2_USER_DATA_LIMIT:
        raise UsageError(f"the boot script is {len(text.encode())} bytes; EC2 allows {EC2_USER_DATA_LIMIT}",
                         param="models", hint="pass fewer or shorter models")
    return text


def _boot_settings(spec: UserDataSpec) -> dict[str, Any]:
    """The agent's ``boot.json``: where the server answers "ready", the hook, the assets and their manifest's sha256."""
    hook, assets = spec.lifecycle_hook, spec.assets
    return {
        "console": spec.paths.console, "wait_s": READY_WAIT_S,
        "ready": f"http://127.0.0.1:{spec.inference_port}{READY_PATHS[spec.server]}",
        "hook": {"group": hook.group, "name": hook.name} if hook else None,
        "assets": {"bucket": assets.bucket, "prefix": assets.prefix, "region": assets.region,
                   "dest": f"{spec.paths.app_dir}/assets",
                   "manifest_sha256": assets.manifest_sha256 or "<manifest-sha256>"} if assets else None,
    }


@lru_cache(maxsize=1)
def agent_source() -> str:
    """The agent as the instance runs it: docstrings and comments left out, one space an indent level."""
    tree = ast.parse(AGENT.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return re.sub(r"(?m)^((?:    )+)", lambda m: " " * (len(m.group(1)) // 4), ast.unparse(tree))


def _agent_blob() -> str:
    """The agent as the script carries it: gzip (no timestamp: the same agent is the same bytes), base64 in
    76-column lines (the user data's 16 KB would not hold it as text)."""
    source = agent_source().encode("utf-8")
    return base64.encodebytes(gzip.compress(source, 9, mtime=0)).decode("ascii").rstrip("\n")


@dataclass(frozen=True)
class _ServerPart:
    """The lines of the boot script that differ between the two servers."""

    label: str
    pip_requirements: str  # shell-quoted, for `pip install`
    exec_line: str  # what run-server.sh execs
    config: str  # shell lines that write the server's config file, or ""


def _check_server(spec: UserDataSpec) -> None:
    """A known server; without assets, only what the instance can reach itself; for MMS (which cannot
    resolve zoo names) archive URLs only."""
    if spec.server not in SERVERS:
        raise UsageError(f"unknown server {spec.server!r}; choose one of: {', '.join(SERVERS)}")
    if spec.assets is None:
        for m in spec.models:
            if m.kind == "path":
                raise UsageError(f"model {m.arg}: a local file is not on the instance when it installs from the "
                                 "package index", param="models",
                                 hint="leave out the pip spec (the model then goes through the asset bucket), "
                                      "or pass an https URL")
            if m.kind == "s3":
                raise UsageError(f"model {m.arg}: the instance reads s3:// models through the asset bucket, "
                                 "not when it installs from the package index", param="models")
    if spec.server == "mms":
        for m in spec.models:
            if "://" not in m.location:
                raise MmsNeedsArchiveUrl(f"model {m.arg}: MMS needs an archive URL, not a zoo name",
                                         params=("models", "server"),
                                         hint="serve it with the mmsctl server, which resolves zoo names itself")


def _python_check(assets: Optional[AssetsRef]) -> str:
    """With assets, the AMI's python3 must be the wheelhouse's: checked first, so a wrong AMI fails in a second."""
    if assets is None:
        return ""
    major, minor = assets.python.split(".")
    return (f"\n# The wheels are for Python {assets.python}: this AMI's python3 must be that one.\nstep python\n"
            f'python3 -c "import sys; sys.exit(sys.version_info[:2] != ({major}, {minor}))" || '
            f'fail "the wheels are for Python {assets.python}, this AMI\'s python3 is $(python3 -V 2>&1)"\n')


def _fetch_part(assets: Optional[AssetsRef]) -> str:
    """The lines that fetch the assets with the instance role (the agent; the manifest's sha256 is in boot.json)."""
    if assets is None:
        return ""
    return (f"\n# 4. What this instance serves, from s3://{assets.bucket}/{assets.prefix} (the instance role, IMDSv2;\n"
            "#    the manifest whose sha256 boot.json names, each file checked against it).\n"
            'step fetch\npython3 "$APP_DIR/boot.py" fetch\n')


def _pip_part(spec: UserDataSpec, requirements: str) -> str:
    """From the wheelhouse among the assets (no index), else from the package index."""
    if spec.assets is not None:
        # --no-compile: the .pyc of what the server imports are written on its first start (seconds),
        # not of every module of every wheel at boot (most of pip's time here)
        return (f'"$VENV/bin/pip" install --no-index --no-compile --find-links "$APP_DIR/assets/wheelhouse" '
                f'{requirements}')
    return f'"$VENV/bin/pip" install --upgrade pip\n"$VENV/bin/pip" install {requirements}'


def _mms_part(spec: UserDataSpec) -> _ServerPart:
    """Multi Model Server: its pinned release, configured through config.properties."""
    p = spec.paths
    exec_line = " ".join([
        f"exec {p.app_dir}/venv/bin/multi-model-server --start --foreground",
        f"--mms-config {p.conf_dir}/config.properties --model-store {p.data_dir}/models",
        *(["--models", *(shlex.quote(m.arg) for m in spec.models)] if spec.models else []),
    ])
    config = "\n".join([
        f"cat > {p.conf_dir}/config.properties <<'MMSCTL_EOF'",
        f"inference_address=http://0.0.0.0:{spec.inference_port}",
        f"management_address=http://{spec.management_host}:{spec.management_port}",
        f"model_store={p.data_dir}/models",
        "MMSCTL_EOF",
        "",
    ])
    pip_requirements = " ".join(shlex.quote(r) for r in (
        f"multi-model-server=={MMS_VERSION}", "mxnet==1.9.1", "numpy<1.24"))
    return _ServerPart(f"Multi Model Server {MMS_VERSION}", pip_requirements, exec_line, config)


def _mmsctl_part(spec: UserDataSpec, version: str) -> _ServerPart:
    """The mmsctl server: this version (or *spec*'s pip spec), configured by its flags."""
    exec_line = " ".join([
        f"exec {spec.paths.app_dir}/venv/bin/mmsctl serve start --foreground",
        f"--inference-address http://0.0.0.0:{spec.inference_port}",
        f"--management-address http://{spec.management_host}:{spec.management_port}",
        *(f"--models {shlex.quote(m.arg)}" for m in spec.models),
    ])
    return _ServerPart(f"mmsctl {version}", shlex.quote(spec.pip_spec or f"mmsctl=={version}"), exec_line, "")


def _accelerator_note(accelerator: str) -> str:
    """A comment in the script on what the accelerator needs beyond what the script installs."""
    if accelerator.startswith("eia"):
        return ("# Elastic Inference: the EI-enabled MXNet build (amazonei_mxnet) is no longer distributed;\n"
                "# models run on the instance's CPU unless a handler loads them with mx.eia().")
    if accelerator in ("inf1", "inf2"):
        return "# Inferentia: models must be compiled with the Neuron SDK (on the AMI) to use the NeuronCores."
    return ""
