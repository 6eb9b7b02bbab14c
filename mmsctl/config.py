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
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping, Optional

from mmsctl.errors import ConfigError

__all__ = [
    "cache_dir",
    "config_dir",
    "load_toml",
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
    """Read a TOML file; a missing file is an empty mapping."""
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
    """Write a TOML file atomically (a temp file renamed into place)."""
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        tomli_w.dump(dict(data), fh)
    os.replace(tmp, path)


def setting(key: str, default: Optional[str] = None) -> Optional[str]:
    """One setting: ``MMSCTL_<KEY>`` in the environment, else config.toml, else *default*."""
    env = os.environ.get("MMSCTL_" + key.upper())
    if env is not None and env != "":
        return env
    value = load_toml(settings_file()).get(key)
    if value is None:
        return default
    return str(value)
