"""Bearer tokens for remote servers, read from a token file (never stored in the config).

A token file is either a plain token on one line, or TorchServe's
``key_file.json`` (``{"management": {"key": …}, "inference": {"key": …}, "API": …}``):
then the management key goes to the management API and the inference key to the
inference API, as TorchServe expects.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, Optional

from mmsctl.errors import ConfigError

__all__ = ["Api", "read_token"]

Api = Literal["inference", "management", "metrics"]


def read_token(token_file: Optional[str], api: Api) -> Optional[str]:
    """The token to send to *api*, or None when there is no token file.

    Raises:
        ConfigError: the file is missing, unreadable or has no key for *api*.
    """
    if not token_file:
        return None
    path = Path(token_file).expanduser()
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise ConfigError(f"token file {path} not found", hint="fix it with `mmsctl context add … --token-file`") from None
    except OSError as exc:
        raise ConfigError(f"token file {path}: cannot read: {exc.strerror}") from None
    if not text:
        raise ConfigError(f"token file {path} is empty")
    if not text.startswith("{"):
        return text.splitlines()[0].strip()
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"token file {path}: not a token and not valid JSON: {exc}") from None
    kind = "management" if api == "metrics" else api
    entry = data.get(kind) if isinstance(data, dict) else None
    key = entry.get("key") if isinstance(entry, dict) else entry
    if not key:
        raise ConfigError(f"token file {path} has no {kind!r} key")
    return str(key)
