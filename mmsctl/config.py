"""Where mmsctl keeps things, and the user's settings file.

Folders follow the XDG base-directory spec (through platformdirs), each with an
``MMSCTL_*`` override so tests and air-gapped sites can move them:

==============  ===========================  =======================
what            default (Linux)              override
==============  ===========================  =======================
cache           ``~/.cache/mmsctl``          ``MMSCTL_CACHE_DIR``
config          ``~/.config/mmsctl``         ``MMSCTL_CONFIG_DIR``
state           ``~/.local/state/mmsctl``    ``MMSCTL_STATE_DIR``
==============  ===========================  =======================

Settings live in ``<config>/config.toml`` (flat keys such as ``zoo_url`` and
``offline``); each has an environment variable ``MMSCTL_<KEY>`` that wins over
the file. Contexts (named servers) are kept by ``mmsctl.client.contexts``.

``max_model_memory`` (``MMSCTL_MAX_MODEL_MEMORY``) bounds, in bytes, what one model's network may
allocate in ``mmsctl predict`` (the server has its own key in ``config.properties``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from mmsctl.atomic import write_atomic
from mmsctl.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "cache_dir",
    "config_dir",
    "load_toml",
    "max_response_bytes",
    "max_model_memory",
    "save_toml",
    "setting",
    "settings_file",
    "state_dir",
]

_APP = "mmsctl"


def _dir(env: str, kind: str) -> Path:
    override = os.environ.get(env)
    if override:
        return Path(override).expanduser()
    import platformdirs

    if kind == "cache":
        return Path(platformdirs.user_cache_dir(_APP, appauthor=False))
    if kind == "config":
        return Path(platformdirs.user_config_dir(_APP, appauthor=False))
    return Path(platformdirs.user_state_dir(_APP, appauthor=False))


def cache_dir() -> Path:
    """Downloaded archives and other data that can be fetched again."""
    return _dir("MMSCTL_CACHE_DIR", "cache")


def config_dir() -> Path:
    """The user's settings and contexts."""
    return _dir("MMSCTL_CONFIG_DIR", "config")


def state_dir() -> Path:
    """Per-instance server state: pid, ports, logs."""
    return _dir("MMSCTL_STATE_DIR", "state")


def settings_file() -> Path:
    return config_dir() / "config.toml"


def load_toml(path: Path) -> dict[str, Any]:
    """Read a TOML file; a missing file is an empty mapping (found without importing the parser)."""
    if not os.path.exists(path):
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.9/3.10
        import tomli as tomllib
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from exc


def save_toml(path: Path, data: Mapping[str, Any]) -> None:
    """Write a TOML file atomically (:func:`mmsctl.atomic.write_atomic`)."""
    import tomli_w

    write_atomic(path, tomli_w.dumps(dict(data)))


def setting(key: str, default: Optional[str] = None) -> Optional[str]:
    """One setting: ``MMSCTL_<KEY>`` in the environment, else config.toml, else *default*."""
    env = os.environ.get("MMSCTL_" + key.upper())
    if env is not None and env != "":
        return env
    value = load_toml(settings_file()).get(key)
    if value is None:
        return default
    return str(value)


#: The most bytes a network may take unless set otherwise: 4 GiB, or half the machine's memory where that
#: is less: every zoo model fits at a batch of 4 (docs/performance.md).
MAX_MODEL_MEMORY_CAP = 4 * 1024**3


def default_max_model_memory() -> int:
    """4 GiB, or half of this machine's physical memory where that is less."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        return MAX_MODEL_MEMORY_CAP
    return min(MAX_MODEL_MEMORY_CAP, max(1, total // 2))


def max_model_memory() -> int:
    """The ``max_model_memory`` setting in bytes (``MMSCTL_MAX_MODEL_MEMORY``, else config.toml, else the default).

    Raises:
        ConfigError: the value is not a whole number of bytes above 0.
    """
    value = setting("max_model_memory")
    if value is None:
        return default_max_model_memory()
    text = value.strip().replace("_", "")
    if not text.isdigit() or int(text) < 1:
        raise ConfigError(f"max_model_memory must be a number of bytes above 0, got {value!r}",
                          hint="set MMSCTL_MAX_MODEL_MEMORY or max_model_memory in config.toml, e.g. 4294967296")
    return int(text)


#: The largest answer a client reads from a server (``max_response_bytes``): 64 MiB.
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024


def max_response_bytes() -> int:
    """The ``max_response_bytes`` setting: the most bytes of one answer mmsctl's clients read.

    A server that sends more (a 1 GiB prediction, 100 MB of ``/models``) is cut off there
    and its answer is an error, so a broken or hostile server cannot fill the memory.
    """
    raw = setting("max_response_bytes")
    if raw is None:
        return DEFAULT_MAX_RESPONSE_BYTES
    try:
        value = int(raw.replace("_", ""))
    except ValueError:
        raise ConfigError(f"max_response_bytes must be a whole number of bytes, not {raw!r}",
                          hint="set MMSCTL_MAX_RESPONSE_BYTES or max_response_bytes in config.toml") from None
    if value < 1:
        raise ConfigError(f"max_response_bytes must be at least 1, not {value}")
    return value
