"""The boot script that installs the model server and starts it with the given models under systemd.

The script is plain, readable bash (``mmsctl ec2 user-data`` prints it); the
template is ``userdata.sh`` beside this module, filled with ``@@{name}``
markers so shell ``${VARS}`` stay untouched. Model arguments are shell-quoted
once, into ``/opt/mmsctl/run-server.sh``, which systemd runs without
re-parsing them.
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Optional
from urllib.parse import urlparse

from mmsctl.errors import UsageError
from mmsctl.names import model_location

__all__ = ["MmsNeedsArchiveUrl", "ModelSpec", "UserDataSpec", "parse_models", "render_user_data", "server_kind"]

ServerKind = Literal["mmsctl", "mms"]
SERVERS: tuple[ServerKind, ...] = ("mmsctl", "mms")
_TEMPLATE = Path(__file__).with_name("userdata.sh")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ZOO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
MMS_VERSION = "1.1.11"
EC2_USER_DATA_LIMIT = 16 * 1024  # RunInstances refuses more (before base64)


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
    """One model to serve, ``name=location``: location is a zoo name or an http(s) URL reachable from the instance."""

    name: str
    location: str

    @property
    def arg(self) -> str:
        return f"{self.name}={self.location}"


def parse_models(values: list[str]) -> list[ModelSpec]:
    """``["squeezenet", "r18=https://…/resnet-18.mar"]`` -> specs; local files are refused (not on the instance)."""
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
            if where.kind == "url":
                pass
            elif scheme == "s3":
                raise UsageError(f"model {item!r}: the instance cannot read s3:// URLs", param="models",
                                 hint="share it as a presigned https URL: `aws s3 presign s3://… --expires-in 86400`")
            elif where.kind == "path":
                raise UsageError(f"model {item!r}: a local file is not on the instance", param="models",
                                 hint="upload it (S3, a web server) and pass its https URL, or use a zoo name")
            elif not _ZOO_RE.match(location):
                raise UsageError(f"model {item!r}: not a zoo name or an http(s) URL", param="models")
            if not _NAME_RE.match(name):
                raise UsageError(f"model {item!r}: model name must be letters, digits, '.', '_' or '-'",
                                 param="models")
            specs.append(ModelSpec(name, location))
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


def render_user_data(spec: UserDataSpec) -> str:
    """The boot script for *spec*, ready for RunInstances ``UserData`` (boto3 base64-encodes it)."""
    from mmsctl import __version__

    version = spec.version or __version__
    _check_server(spec)
    server = _mms_part(spec) if spec.server == "mms" else _mmsctl_part(spec, version)
    java = spec.server == "mms"
    text = _Template(_TEMPLATE.read_text(encoding="utf-8")).substitute(
        server_label=server.label,
        model_list=", ".join(m.arg for m in spec.models) or "(no models; register them later)",
        accelerator=spec.accelerator,
        version=version,
        accelerator_note=_accelerator_note(spec.accelerator),
        java_comment=" and Java 17 for MMS" if java else "",
        apt_java=" openjdk-17-jre-headless" if java else "",
        dnf_java=" java-17-amazon-corretto-headless" if java else "",
        pip_requirements=server.pip_requirements,
        server_config=server.config,
        exec_line=server.exec_line,
        inference_port=spec.inference_port,
    )
    if len(text.encode()) > EC2_USER_DATA_LIMIT:
        raise UsageError(f"the boot script is {len(text.encode())} bytes; EC2 allows {EC2_USER_DATA_LIMIT}",
                         param="models", hint="pass fewer or shorter models")
    return text


@dataclass(frozen=True)
class _ServerPart:
    """The lines of the boot script that differ between the two servers."""

    label: str
    pip_requirements: str  # shell-quoted, for `pip install`
    exec_line: str  # what run-server.sh execs
    config: str  # shell lines that write the server's config file, or ""


def _check_server(spec: UserDataSpec) -> None:
    """A known server, and (for MMS, which cannot resolve zoo names) archive URLs only."""
    if spec.server not in SERVERS:
        raise UsageError(f"unknown server {spec.server!r}; choose one of: {', '.join(SERVERS)}")
    if spec.server == "mms":
        for m in spec.models:
            if "://" not in m.location:
                raise MmsNeedsArchiveUrl(f"model {m.arg}: MMS needs an archive URL, not a zoo name",
                                         params=("models", "server"),
                                         hint="serve it with the mmsctl server, which resolves zoo names itself")


def _mms_part(spec: UserDataSpec) -> _ServerPart:
    """Multi Model Server: its pinned release, configured through config.properties."""
    exec_line = " ".join([
        "exec /opt/mmsctl/venv/bin/multi-model-server --start --foreground",
        "--mms-config /etc/mmsctl/config.properties --model-store /var/lib/mmsctl/models",
        *(["--models", *(shlex.quote(m.arg) for m in spec.models)] if spec.models else []),
    ])
    config = "\n".join([
        "cat > /etc/mmsctl/config.properties <<'MMSCTL_EOF'",
        f"inference_address=http://0.0.0.0:{spec.inference_port}",
        f"management_address=http://{spec.management_host}:{spec.management_port}",
        "model_store=/var/lib/mmsctl/models",
        "MMSCTL_EOF",
        "",
    ])
    pip_requirements = " ".join(shlex.quote(r) for r in (
        f"multi-model-server=={MMS_VERSION}", "mxnet==1.9.1", "numpy<1.24"))
    return _ServerPart(f"Multi Model Server {MMS_VERSION}", pip_requirements, exec_line, config)


def _mmsctl_part(spec: UserDataSpec, version: str) -> _ServerPart:
    """The mmsctl server: this version (or *spec*'s pip spec), configured by its flags."""
    exec_line = " ".join([
        "exec /opt/mmsctl/venv/bin/mmsctl serve start --foreground",
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
