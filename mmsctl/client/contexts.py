"""Named server endpoints, like kubectl contexts, kept in ``<config>/contexts.toml``.

Which context a command uses (first match wins):

1. ``--context NAME`` on the command (or ``mmsctl --context NAME``);
2. ``MMSCTL_CONTEXT`` in the environment;
3. ``current`` in ``contexts.toml`` (set by ``mmsctl context use``);
4. ``local``: the one running ``mmsctl serve`` instance (an error naming them when several
   run), else ``127.0.0.1:8080/8081/8082``. Each running instance is also ``local:NAME``.

Unless a context was named with ``--context``, ``MMSCTL_INFERENCE_URL``,
``MMSCTL_MANAGEMENT_URL``, ``MMSCTL_METRICS_URL`` and ``MMSCTL_TOKEN_FILE`` then
override single fields of it. The file looks like::

    current = "prod"

    [contexts.prod]
    inference = "http://10.0.0.5:8080"
    management = "http://10.0.0.5:8081"
    metrics = "http://10.0.0.5:8082"
    token_file = "/home/me/ts/key_file.json"

``sagemaker:NAME`` is the SageMaker endpoint NAME (``mmsctl sagemaker``): ``predict``, ``bench`` and ``top``
reach it through AWS (sagemaker-runtime, CloudWatch) with boto3's credentials and region.

A fleet context also names its members (``mmsctl.client.fanout``): a static list
(``members = ["http://10.0.0.5:8081", …]``), or an mmsctl fleet on AWS
(``fleet = "NAME"``, ``region = "…"``) whose members are looked up when a command
runs. ``inference`` is then where ``predict`` goes (the fleet's load balancer)
and ``management`` may be left out.
"""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Sequence
from urllib.parse import urlsplit

from mmsctl.config import config_dir, load_toml, save_toml
from mmsctl.errors import ConfigError, NotFoundError, UsageError

if TYPE_CHECKING:
    from mmsctl.local_servers import InstanceState

__all__ = [
    "DEFAULT_INFERENCE_URL",
    "DEFAULT_MANAGEMENT_URL",
    "DEFAULT_METRICS_URL",
    "LOCAL",
    "BuiltinContextError",
    "Context",
    "check_mms_api",
    "ContextNotFound",
    "ContextStore",
    "LocalServerNotRunning",
    "NoModelServerApi",
    "SAGEMAKER",
    "context_names",
    "contexts_file",
    "instance_contexts",
    "local_context",
    "resolve_context",
    "sagemaker_context",
    "validate_url",
]

LOCAL = "local"
DEFAULT_INFERENCE_URL = "http://127.0.0.1:8080"
DEFAULT_MANAGEMENT_URL = "http://127.0.0.1:8081"
DEFAULT_METRICS_URL = "http://127.0.0.1:8082"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@:-]{0,62}$")


class ContextNotFound(NotFoundError):
    """A context name that is not in contexts.toml."""

    reference = "context-not-found"


class LocalServerNotRunning(ContextNotFound):
    """``local:NAME`` names a local server instance that is not running."""

    reference = "local-server-not-running"


class BuiltinContextError(UsageError):
    """``local`` (and ``local:NAME``) are built in: they cannot be added or removed."""

    reference = "builtin-context"

    def __init__(self, message: str, *, operation: str) -> None:
        super().__init__(message)
        self.operation = operation


@dataclass(frozen=True)
class Context:
    """Where one server's APIs are, and how to authenticate to them.

    ``source`` says where it came from (``flag``, ``env``, ``file``, ``instance``,
    ``default``), so ``mmsctl context current`` can explain itself.
    """

    name: str
    inference_url: str
    management_url: str
    metrics_url: Optional[str] = None
    token_file: Optional[str] = None
    source: str = "file"
    members: tuple[str, ...] = ()  # fleet member specs (mmsctl.client.fanout.parse_members)
    fleet: Optional[str] = None  # an mmsctl fleet on AWS whose members are found when a command runs
    region: Optional[str] = None  # the fleet's AWS region
    #: What the server speaks: ``mms`` (MMS 1.1 / TorchServe / mmsctl) or ``v2`` (the Open Inference Protocol,
    #: KServe v2: Triton, KServe, MLServer, ``mmsctl serve``), whose servers have no management API.
    protocol: str = "mms"
    #: A SageMaker endpoint (``sagemaker:NAME``): reached through sagemaker-runtime with AWS credentials, in
    #: ``region`` or the default one; it has no management or metrics API (CloudWatch has its figures).
    sagemaker: Optional[str] = None

    @property
    def is_fleet(self) -> bool:
        """Management commands fan out to every member."""
        return bool(self.members or self.fleet)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["members"] = list(self.members)
        return data


def contexts_file() -> Path:
    return config_dir() / "contexts.toml"


def validate_url(url: str, what: str) -> str:
    """An http(s) URL with a host, without a trailing slash.

    *what* names the value in messages: ``inference`` (→ "bad inference URL …")
    or an environment variable such as ``MMSCTL_INFERENCE_URL``.
    """
    label = what if what.endswith("_URL") else f"{what} URL"
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"bad {label} {url!r}: expected http(s)://HOST:PORT")
    try:
        _ = parts.port  # raises for a port that is not a number or out of range
    except ValueError:
        raise UsageError(f"bad {label} {url!r}: the port must be a number from 1 to 65535") from None
    return url.strip().rstrip("/")


#: The protocols a context may speak.
PROTOCOLS = ("mms", "v2")


def check_protocol(protocol: str, where: str) -> str:
    """*protocol* if it is one of :data:`PROTOCOLS`, else a UsageError naming *where*."""
    if protocol not in PROTOCOLS:
        raise UsageError(f"{where}: unknown protocol {protocol!r} (one of {', '.join(PROTOCOLS)})")
    return protocol


def _check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UsageError(f"bad context name {name!r}: use letters, digits and . _ - @ : (up to 63)")
    return name


class ContextStore:
    """Read and change ``contexts.toml``; every change is written atomically."""

    def __init__(self, path: Optional[Path] = None) -> None:
        self.path = path or contexts_file()
        self._data = load_toml(self.path)
        if not isinstance(self._data.get("contexts", {}), dict):
            raise ConfigError(f"{self.path}: 'contexts' must be a table")

    @property
    def current(self) -> Optional[str]:
        value = self._data.get("current")
        return str(value) if value else None

    def names(self) -> list[str]:
        return sorted(self._data.get("contexts", {}))

    def get(self, name: str) -> Context:
        if name == LOCAL and name not in self._data.get("contexts", {}):
            return local_context()
        if name.startswith(f"{LOCAL}:") and name not in self._data.get("contexts", {}):
            # Each running `mmsctl serve` instance X is the context local:X.
            return _running_instance(name.split(":", 1)[1])
        if name.startswith(f"{SAGEMAKER}:") and name not in self._data.get("contexts", {}):
            return sagemaker_context(name.split(":", 1)[1])
        entry = self._data.get("contexts", {}).get(name)
        if not isinstance(entry, dict):
            known = ", ".join(dict.fromkeys([LOCAL, *(c.name for c in instance_contexts()), *self.names()]))
            raise ContextNotFound(f"context {name!r} not found (known: {known})")
        members = entry.get("members") or []
        if not isinstance(members, list) or not all(isinstance(m, str) for m in members):
            raise ConfigError(f"{self.path}: context {name!r}: 'members' must be a list of URLs")
        fleet = str(entry["fleet"]) if entry.get("fleet") else None
        try:
            return Context(
                name=name,
                inference_url=str(entry["inference"]),
                management_url=str(entry["management"] if "management" in entry or not (members or fleet) else ""),
                metrics_url=str(entry["metrics"]) if entry.get("metrics") else None,
                token_file=str(entry["token_file"]) if entry.get("token_file") else None,
                source="file",
                members=tuple(members),
                fleet=fleet,
                region=str(entry["region"]) if entry.get("region") else None,
                protocol=check_protocol(str(entry.get("protocol") or "mms"), f"{self.path}: context {name!r}"),
            )
        except KeyError as exc:
            raise ConfigError(f"{self.path}: context {name!r} has no {exc.args[0]!r} URL") from None

    def all(self) -> list[Context]:
        return [self.get(n) for n in self.names()]

    def add(self, context: Context, *, overwrite: bool = True) -> None:
        _check_name(context.name)
        if context.name == LOCAL:
            raise BuiltinContextError(f"{LOCAL!r} is the built-in context of the local server; choose another name",
                                      operation="add")
        contexts = self._data.setdefault("contexts", {})
        if context.name in contexts and not overwrite:
            raise UsageError(f"context {context.name!r} already exists")
        entry: dict[str, Any] = {"inference": validate_url(context.inference_url, "inference")}
        if context.management_url or not context.is_fleet:
            entry["management"] = validate_url(context.management_url, "management")
        if context.members:
            entry["members"] = list(context.members)
        if context.fleet:
            entry["fleet"] = context.fleet
        if context.region:
            entry["region"] = context.region
        if context.metrics_url:
            entry["metrics"] = validate_url(context.metrics_url, "metrics")
        if check_protocol(context.protocol, f"context {context.name!r}") != "mms":
            entry["protocol"] = context.protocol
        if context.token_file:
            entry["token_file"] = str(Path(context.token_file).expanduser().resolve())
        contexts[context.name] = entry
        self._save()

    def use(self, name: str) -> Context:
        context = self.get(name)
        self._data["current"] = name
        self._save()
        return context

    def remove(self, name: str) -> None:
        contexts = self._data.get("contexts", {})
        if name not in contexts and (name == LOCAL or name.startswith(f"{LOCAL}:")):
            raise BuiltinContextError(f"{name!r} is the built-in context of the local server; it cannot be removed",
                                      operation="remove")
        if name not in contexts:
            raise ContextNotFound(f"context {name!r} not found")
        del contexts[name]
        if self._data.get("current") == name:
            self._data.pop("current", None)
        self._save()

    def _save(self) -> None:
        save_toml(self.path, self._data)


#: ``sagemaker:NAME`` is the SageMaker endpoint NAME (built in, like ``local:NAME``).
SAGEMAKER = "sagemaker"
_ENDPOINT = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


def sagemaker_context(endpoint: str) -> Context:
    """The context of SageMaker endpoint *endpoint* (its name as SageMaker spells endpoint names)."""
    if not _ENDPOINT.match(endpoint):
        raise UsageError(f"{SAGEMAKER}:{endpoint}: not a SageMaker endpoint name (letters, digits and '-', "
                         "up to 63)")
    return Context(f"{SAGEMAKER}:{endpoint}", f"sagemaker://{endpoint}", "", source="sagemaker",
                   sagemaker=endpoint)


class NoModelServerApi(UsageError):
    """A SageMaker endpoint's context was asked for a model server's API (management, metrics, ping)."""

    reference = "sagemaker-context-no-api"

    def __init__(self, message: str, *, context: str, endpoint: str) -> None:
        super().__init__(message)
        #: The context (``sagemaker:NAME``) and its endpoint, for the CLI's hint.
        self.context, self.endpoint = context, endpoint


def check_mms_api(context: Context, api: str) -> None:
    """Refuse an HTTP client of *api* for a SageMaker endpoint's context, which has none.

    Raises:
        NoModelServerApi: *context* is ``sagemaker:NAME``.
    """
    if context.sagemaker:
        raise NoModelServerApi(f"context {context.name} is a SageMaker endpoint: it has no {api} API of a model "
                               "server", context=context.name, endpoint=context.sagemaker)


def local_context() -> Context:
    """The local server: the one running ``mmsctl serve`` instance, else MMS's default ports.

    Raises:
        AmbiguousInstanceError: several instances run here (each is ``local:NAME``; say which).
    """
    from mmsctl.local_servers import one_running

    state = one_running()
    if state is not None:
        return replace(_instance_context(state), name=LOCAL)
    return Context(LOCAL, DEFAULT_INFERENCE_URL, DEFAULT_MANAGEMENT_URL, DEFAULT_METRICS_URL, source="default")


def instance_contexts() -> list[Context]:
    """Every running ``mmsctl serve`` instance as its own context, ``local:NAME``."""
    from mmsctl.local_servers import running_instances

    try:
        return [_instance_context(state) for state in running_instances()]
    except OSError:
        return []


def context_names() -> list[str]:
    """Every name ``--context`` takes: ``local``, ``local:NAME`` of each running server, contexts.toml's."""
    return list(dict.fromkeys([LOCAL, *(c.name for c in instance_contexts()), *ContextStore().names()]))


def _instance_context(state: "InstanceState") -> Context:
    return Context(f"{LOCAL}:{state.name}", state.inference_url, state.management_url, state.metrics_url or None,
                   state.token_file or None, source="instance")


def _running_instance(name: str) -> Context:
    """``local:NAME``: the running instance called *name*."""
    for context in instance_contexts():
        if context.name == f"{LOCAL}:{name}":
            return context
    raise LocalServerNotRunning(f"no mmsctl server named {name!r} is running here (context {LOCAL}:{name})")


def _env(key: str) -> Optional[str]:
    value = os.environ.get(key)
    return value if value else None


#: The URL fields of a context and the variables that override them.
_URL_OVERRIDES = (
    ("inference_url", "MMSCTL_INFERENCE_URL"),
    ("management_url", "MMSCTL_MANAGEMENT_URL"),
    ("metrics_url", "MMSCTL_METRICS_URL"),
)
ALL_URLS = tuple(field_name for field_name, _ in _URL_OVERRIDES)


def resolve_context(name: Optional[str] = None, *, store: Optional[ContextStore] = None,
                    needs: Sequence[str] = ALL_URLS) -> Context:
    """The context a command talks to (precedence: flag > env > file > local default).

    When nothing names a context and the environment gives every URL in *needs*, the local
    servers are not consulted at all: several running is no ambiguity then, and a local
    instance's token file never goes to a server the environment named.

    Args:
        name: the ``--context`` value, if any.
        store: the contexts file (default: ``<config>/contexts.toml``).
        needs: the URL fields the command uses (``inference_url``, ``management_url``, ``metrics_url``).

    Raises:
        ContextNotFound: *name*, ``MMSCTL_CONTEXT`` or ``current`` names no known context.
        UsageError: an ``MMSCTL_*_URL`` override is not an http(s) URL.
    """
    store = store or ContextStore()
    if name:
        context = store.get(name)
        return replace(context, source="flag") if context.source == "file" else context
    overrides: dict[str, Any] = {}
    for field_name, key in _URL_OVERRIDES:
        value = _env(key)
        if value:
            overrides[field_name] = validate_url(value, key)
    env_name = _env("MMSCTL_CONTEXT")
    if env_name:
        context = replace(store.get(env_name), source="env")
    elif store.current:
        context = store.get(store.current)
    elif all(field_name in overrides for field_name in needs):
        context = Context(LOCAL, DEFAULT_INFERENCE_URL, DEFAULT_MANAGEMENT_URL, DEFAULT_METRICS_URL, source="env")
    else:
        context = local_context()
    token_file = _env("MMSCTL_TOKEN_FILE")
    if token_file:
        overrides["token_file"] = token_file
    if overrides:
        context = replace(context, source="env", **overrides)
    return context
