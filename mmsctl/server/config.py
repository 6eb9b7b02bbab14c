"""The server's settings: a picklable dataclass, read from MMS ``config.properties`` plus flags.

An MMS user's ``config.properties`` works as is: the keys MMS 1.1 reads for the
front end (addresses, model store, start-up models, workers, queue, sizes,
timeouts) keep their names and meaning. Keys we do not use are kept in
``extra`` and ignored. Where our default differs from MMS it is on purpose and
listed in docs/server.md (``job_queue_size``).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional
from urllib.parse import urlsplit

from mmsctl.errors import ConfigError

__all__ = ["ServerConfig", "default_worker_limit", "load_properties", "parse_address", "parse_properties"]

#: MMS's default body limit (6.5 MB), in bytes.
DEFAULT_MAX_REQUEST_SIZE = 6553500
#: MMS answers 503 once 100 requests wait; we wait for 1000 so 500 concurrent clients all get 200.
DEFAULT_JOB_QUEUE_SIZE = 1000
#: PIL's ``Image.MAX_IMAGE_PIXELS``: decoded pixels the built-in image handler accepts per image.
DEFAULT_MAX_IMAGE_PIXELS = 89_478_485
#: What one archive may extract to (bytes, members): every real model fits (VGG-19 is 550 MiB).
DEFAULT_MAX_ARCHIVE_SIZE = 8 * 1024**3
DEFAULT_MAX_ARCHIVE_MEMBERS = 10_000
#: ``server.log`` is rotated past this size, keeping this many old files (``server.log.1`` ...).
DEFAULT_LOG_MAX_SIZE = 10 * 1024**2
DEFAULT_LOG_BACKUPS = 5
#: ``default_service_handler``: a module or a ``.py`` file, and optionally ``:function``.
_HANDLER = re.compile(r"[^:\s]+(:[A-Za-z_]\w*)?")
#: Memory one worker takes at least (the interpreter, mxnet, a small model): the default worker limit's unit.
_WORKER_MEMORY = 256 * 1024**2


def default_worker_limit() -> int:
    """Workers a machine can run: 4 per core, and no more than its memory holds at 256 MiB each."""
    cores = os.cpu_count() or 1
    try:  # what psutil.virtual_memory().total reports, without importing psutil (serve start stays light)
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        total = -1
    if total <= 0:
        import psutil

        total = psutil.virtual_memory().total
    return max(1, min(4 * cores, int(total // _WORKER_MEMORY)))


@dataclass
class ServerConfig:
    """Everything the server process needs; plain values only, so it pickles and serialises."""

    inference_address: str = "http://127.0.0.1:8080"
    #: Empty: the API is not served (``python -m mmsctl.sagemaker serve``: SageMaker reaches only the inference port).
    management_address: str = "http://127.0.0.1:8081"
    metrics_address: str = "http://127.0.0.1:8082"
    model_store: Optional[str] = None
    #: Start-up models: ``name=location`` or ``location`` entries (``load_models`` / ``--models``).
    load_models: list[str] = field(default_factory=list)
    #: Workers of a model registered without ``initial_workers``, and of each start-up model. None (not set):
    #: 0 for a register, as MMS does, and 1 for a start-up model (MMS starts one per CPU core there).
    default_workers_per_model: Optional[int] = None
    job_queue_size: int = DEFAULT_JOB_QUEUE_SIZE
    max_request_size: int = DEFAULT_MAX_REQUEST_SIZE
    #: Seconds a worker may take for one batch before it is killed and restarted.
    default_response_timeout: int = 120
    number_of_gpu: int = 0
    #: Regular expressions a register ``url`` must match to be downloaded (http/https); none: local only.
    allowed_urls: list[str] = field(default_factory=list)
    #: Whether JSON and text request bodies reach handlers decoded (MMS's ``decode_input_request``); else as bytes.
    decode_input_request: bool = True
    #: The handler (``module:function``) of a model whose archive names none (MMS's ``default_service_handler``).
    default_service_handler: Optional[str] = None
    #: Bearer-token file (plain token, or TorchServe ``key_file.json``); None: no auth.
    token_file: Optional[str] = None
    #: OpenMP/MKL threads per worker (``serve start`` takes ``OMP_NUM_THREADS`` where it is set).
    worker_threads: int = 1
    #: Seconds a worker may take to load its model.
    worker_start_timeout: float = 180.0
    #: Seconds between MMS-style metric lines in the log.
    metric_time_interval: int = 60
    #: Seconds ``unregister`` waits for queued requests before answering them 503.
    unregister_model_timeout: int = 120
    #: The most worker processes the server runs, all models together (None: :func:`default_worker_limit`).
    worker_limit: Optional[int] = None
    #: Decoded pixels per image the built-in image handler accepts (``MMSCTL_MAX_IMAGE_PIXELS`` in workers).
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    #: Bytes a model's network may take (outputs of every node, weights, input, at its batch size): a register
    #: over it fails with the figure (``MMSCTL_MAX_MODEL_MEMORY`` in workers; None: 4 GiB, or half the memory).
    max_model_memory: Optional[int] = None
    #: Bytes and members one archive may extract to (a register over them is a 400).
    max_archive_size: int = DEFAULT_MAX_ARCHIVE_SIZE
    max_archive_members: int = DEFAULT_MAX_ARCHIVE_MEMBERS
    #: Seconds a connection may take to send a complete request head (idle keep-alive included).
    request_header_timeout: float = 60.0
    #: Seconds a request may take to send its whole body.
    request_body_timeout: float = 60.0
    #: Bytes of request bodies held at once, all requests together (None: a quarter of the memory).
    max_buffered_bytes: Optional[int] = None
    #: ``server.log`` size before it is rotated, and how many rotated files are kept.
    log_max_size: int = DEFAULT_LOG_MAX_SIZE
    log_backups: int = DEFAULT_LOG_BACKUPS
    #: ``GET /ping`` answers 503 ``Unhealthy`` while a model that should have workers has none READY (the status
    #: code is all SageMaker, and load balancers without a body check, read); MMS's 200 with the status text if false.
    strict_ping: bool = False
    #: Seconds SIGTERM drains queued and in-flight requests for, when ``serve stop --timeout`` did not say.
    drain_timeout: float = 30.0
    name: Optional[str] = None
    extra: dict[str, str] = field(default_factory=dict)

    # -- derived -----------------------------------------------------------------------------
    @property
    def register_workers(self) -> int:
        """Workers of a model registered without ``initial_workers``: ``default_workers_per_model``, else 0."""
        return self.default_workers_per_model or 0

    @property
    def startup_workers(self) -> int:
        """Workers of each start-up model: ``default_workers_per_model``, else 1."""
        return 1 if self.default_workers_per_model is None else self.default_workers_per_model

    @property
    def instance_name(self) -> str:
        """The per-instance folder name: ``--name``, else the inference port."""
        if self.name:
            return self.name
        return str(parse_address(self.inference_address)[1])

    @property
    def workers_allowed(self) -> int:
        """The worker limit in force: ``worker_limit``, else what this machine can run."""
        return self.worker_limit if self.worker_limit is not None else default_worker_limit()

    @property
    def buffered_bytes_allowed(self) -> int:
        """The body-bytes limit in force: ``max_buffered_bytes``, else a quarter of this machine's memory."""
        if self.max_buffered_bytes is not None:
            return self.max_buffered_bytes
        import psutil

        return max(self.max_request_size, int(psutil.virtual_memory().total // 4))

    @property
    def model_memory_allowed(self) -> int:
        """The network limit in force: ``max_model_memory``, else :func:`mmsctl.config.default_max_model_memory`."""
        if self.max_model_memory is not None:
            return self.max_model_memory
        from mmsctl.config import default_max_model_memory

        return default_max_model_memory()

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "ServerConfig":
        data = json.loads(text)
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})

    def validate(self) -> "ServerConfig":
        """Check the values a server cannot start with; raise ConfigError with the key name."""
        parse_address(self.inference_address, key="inference_address")
        for key in ("management_address", "metrics_address"):  # empty: that API is not served at all
            if getattr(self, key):
                parse_address(getattr(self, key), key=key)
        ports = [parse_address(getattr(self, k)) for k in ("inference_address", "management_address")
                 if getattr(self, k)]
        if len(ports) == 2 and ports[0] == ports[1]:
            raise ConfigError(
                "inference_address and management_address must differ",
                hint="MMS serves them on two ports: 8080 and 8081 by default",
            )
        for key in ("default_workers_per_model", "job_queue_size", "max_request_size", "default_response_timeout",
                    "worker_threads", "worker_limit", "max_image_pixels", "max_archive_size",
                    "max_archive_members", "log_max_size", "log_backups", "max_buffered_bytes", "max_model_memory"):
            value = getattr(self, key)
            if value is None and key in ("worker_limit", "max_buffered_bytes", "max_model_memory",
                                         "default_workers_per_model"):
                continue
            minimum = 0 if key in ("default_workers_per_model", "log_backups") else 1
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"{key} must be an integer >= {minimum}, got {value!r}")
        for key in ("request_header_timeout", "request_body_timeout", "drain_timeout"):
            value = getattr(self, key)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value <= 86400:
                raise ConfigError(f"{key} must be a number of seconds between 0 and 86400, got {value!r}")
        if self.startup_workers > self.workers_allowed:
            raise ConfigError(
                f"default_workers_per_model ({self.default_workers_per_model}) is over the worker limit "
                f"({self.workers_allowed})", hint="raise the worker_limit setting, or start fewer workers")
        if self.default_service_handler is not None and not _HANDLER.fullmatch(self.default_service_handler):
            raise ConfigError(f"default_service_handler must be module[:function] or /path/to/file.py[:function], "
                              f"got {self.default_service_handler!r}")
        for pattern in self.allowed_urls:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ConfigError(f"allowed_urls: bad regular expression {pattern!r}: {exc}") from exc
        if self.model_store and not Path(self.model_store).is_dir():
            raise ConfigError(f"model_store {self.model_store!r} is not a folder")
        if self.token_file:
            self.api_keys()
        return self

    def api_keys(self) -> dict[str, str]:
        """The Bearer key each API checks (``{}`` without a token file; metrics stays open, as in MMS).

        Raises:
            ConfigError: the token file does not give a usable key for both the inference and
                the management API (a server never starts half-protected).
        """
        if not self.token_file:
            return {}
        from mmsctl.tokens import read_token_file

        tokens = read_token_file(self.token_file)
        try:
            return {api: tokens.key(api) for api in ("inference", "management")}
        except ConfigError as exc:
            raise ConfigError(
                f"{exc.message}: the server needs a key for both the inference and the management API",
                hint="use one token on the first line, or a key_file.json with 'inference' and 'management' keys",
            ) from None


def parse_address(address: str, *, key: str = "address") -> tuple[str, int]:
    """``http://127.0.0.1:8080`` (or ``127.0.0.1:8080``) to ``(host, port)``; HTTPS is refused, and so is a bare
    word (``foo``): it is a typo far more often than a host to serve on port 80."""
    text = address.strip()
    bad = f"{key}: bad address {address!r}: must be a URL like http://127.0.0.1:8080"
    if "://" not in text:
        if ":" not in text:
            raise ConfigError(bad, param=key)
        text = "http://" + text
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{bad} ({exc})", param=key) from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(bad, param=key)
    if parts.scheme == "https":
        raise ConfigError(f"{key}: HTTPS is not supported by the embedded server: {address!r}",
                          hint="put a TLS proxy in front, or use http://")
    if port is None:
        port = 80
    return parts.hostname, port


# -- Java properties ------------------------------------------------------------------------
def parse_properties(text: str, *, source: str = "config") -> dict[str, str]:
    """Parse Java ``.properties`` text as ``java.util.Properties.load`` does (via jproperties).

    ``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments, backslash
    continuations, ``\\t``-style and ``\\uXXXX`` escapes. A malformed ``\\u`` escape is an
    error, as in Java, rather than a silently different value.
    """
    import jproperties

    props = jproperties.Properties()
    try:
        props.load(text)
    except jproperties.ParseError as exc:
        raise ConfigError(f"{source}: line {exc.line_number}: malformed \\uxxxx escape") from None
    return {key: value.data for key, value in props.items()}


def _int(props: dict[str, str], key: str, path: Path) -> Optional[int]:
    if key not in props or props[key].strip() == "":
        return None
    try:
        return int(props[key].strip())
    except ValueError:
        raise ConfigError(f"{path}: {key} must be an integer, got {props[key]!r}") from None


def _float(props: dict[str, str], key: str, path: Path) -> Optional[float]:
    if key not in props or props[key].strip() == "":
        return None
    try:
        return float(props[key].strip())
    except ValueError:
        raise ConfigError(f"{path}: {key} must be a number of seconds, got {props[key]!r}") from None


def _bool(props: dict[str, str], key: str, path: Path) -> bool:
    """``true`` or ``false`` in any case, as Java's ``Boolean.parseBoolean`` reads them (anything else is refused
    rather than read as false)."""
    value = props[key].strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(f"{path}: {key} must be true or false, got {props[key]!r}")
    return value == "true"


def load_properties(path: Path, base: Optional[ServerConfig] = None) -> ServerConfig:
    """Apply an MMS ``config.properties`` file on top of *base* (defaults if None)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    props = parse_properties(text, source=str(path))
    cfg = base or ServerConfig()
    for key in ("inference_address", "management_address", "metrics_address"):
        if props.get(key):
            setattr(cfg, key, props[key].strip())
    if props.get("model_store"):
        cfg.model_store = str((path.parent / os.path.expanduser(props["model_store"].strip())).resolve())
    if props.get("load_models"):
        value = props["load_models"].strip()
        cfg.load_models = [] if value.upper() == "ALL" else [v.strip() for v in value.split(",") if v.strip()]
        if value.upper() == "ALL":
            cfg.extra["load_all_models"] = "true"
    for key in ("default_workers_per_model", "job_queue_size", "max_request_size",
                "default_response_timeout", "number_of_gpu", "metric_time_interval",
                "unregister_model_timeout", "worker_limit", "max_image_pixels", "max_archive_size",
                "max_archive_members", "log_max_size", "log_backups", "max_buffered_bytes", "max_model_memory"):
        number = _int(props, key, path)
        if number is not None:
            setattr(cfg, key, number)
    for key in ("request_header_timeout", "request_body_timeout"):
        seconds = _float(props, key, path)
        if seconds is not None:
            setattr(cfg, key, seconds)
    if props.get("decode_input_request", "").strip():
        cfg.decode_input_request = _bool(props, "decode_input_request", path)
    if props.get("default_service_handler", "").strip():
        cfg.default_service_handler = props["default_service_handler"].strip()
    if props.get("allowed_urls"):
        cfg.allowed_urls = [u.strip() for u in props["allowed_urls"].split(",") if u.strip()]
    if props.get("key_file") or props.get("token_file"):
        cfg.token_file = str(path.parent / (props.get("token_file") or props["key_file"]).strip())
    known = set(ServerConfig.__dataclass_fields__) | {"key_file"}
    cfg.extra.update({k: v for k, v in props.items() if k not in known})
    return cfg

