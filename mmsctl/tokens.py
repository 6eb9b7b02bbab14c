"""Bearer-token files, read in this one place by the server and by every client.

A token file is either one token on its first line, or TorchServe's
``key_file.json`` (``{"management": {"key": ...}, "inference": {"key": ...}}``),
where each API has its own key. A file that does not give a usable key fails
closed with a :class:`~mmsctl.errors.ConfigError`: an empty file, ``null``, a
JSON document without the key an API needs, or a key that cannot travel in an
HTTP header (RFC 6750 ``b64token`` characters only) never turns authentication off.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple, Optional, Union

from mmsctl.errors import ConfigError, InputNotFoundError

__all__ = ["Api", "TokenFile", "read_token", "read_token_file"]

Api = Literal["inference", "management", "metrics"]

#: RFC 6750 b64token: what a Bearer credential may contain.
_TOKEN_RE = re.compile(r"^[A-Za-z0-9\-._~+/]+=*$")
#: A token file is a line or a small JSON document, never megabytes.
_MAX_BYTES = 64 * 1024


class TokenFile(NamedTuple):
    """The keys a token file gives each API (None: the file has no key for it). A NamedTuple: the lean
    ``predict`` reads token files (no ``dataclasses`` on the lean path: tests/cli/test_lazy_imports.py)."""

    path: Path
    inference: Optional[str]
    management: Optional[str]

    def key(self, api: Api) -> str:
        """The key for *api* (metrics uses the management key); a ConfigError if there is none."""
        kind = "management" if api == "metrics" else api
        value = self.inference if kind == "inference" else self.management
        if value is None:
            raise ConfigError(f"token file {self.path} has no {kind!r} key")
        return value


def _check(path: Path, value: Any, what: str) -> Optional[str]:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"token file {path}: the {what} key must be a string, not {type(value).__name__}")
    value = value.strip()
    if not _TOKEN_RE.match(value):
        raise ConfigError(f"token file {path}: the {what} key is empty or has characters a Bearer token cannot have")
    return value


def _from_json(path: Path, data: Any) -> TokenFile:
    if not isinstance(data, dict):
        raise ConfigError(f"token file {path}: expected a token or a JSON object with keys, got {json.dumps(data)[:40]}")
    keys: dict[str, Optional[str]] = {}
    for api in ("inference", "management"):
        entry = data.get(api)
        keys[api] = _check(path, entry.get("key") if isinstance(entry, dict) else entry, api)
    if keys["inference"] is None and keys["management"] is None and "token" in data:
        keys["inference"] = keys["management"] = _check(path, data["token"], "token")
    if keys["inference"] is None and keys["management"] is None:
        raise ConfigError(f"token file {path} has neither an 'inference' nor a 'management' key")
    return TokenFile(path, keys["inference"], keys["management"])


def read_token_file(path: Union[str, Path]) -> TokenFile:
    """Read and check *path*.

    Raises:
        InputNotFoundError: there is no such file.
        ConfigError: unreadable, too large, empty, or without a usable key.
    """
    path = Path(path).expanduser()
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_MAX_BYTES + 1)
    except FileNotFoundError:  # a missing input file is exit 3 (docs/cli.md), as `context add --token-file` says it
        raise InputNotFoundError(f"token file {path} not found") from None
    except OSError as exc:
        raise ConfigError(f"token file {path}: cannot read: {exc.strerror}") from None
    if len(raw) > _MAX_BYTES:
        raise ConfigError(f"token file {path} is larger than {_MAX_BYTES // 1024} KiB: not a token file")
    try:
        text = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise ConfigError(f"token file {path} is not UTF-8 text") from None
    if not text:
        raise ConfigError(f"token file {path} is empty")
    if text.startswith(("{", "[", "null")):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ConfigError(f"token file {path}: not a token and not valid JSON: {exc}") from None
        return _from_json(path, data)
    token = _check(path, text.splitlines()[0], "token")
    return TokenFile(path, token, token)


def read_token(token_file: Optional[Union[str, Path]], api: Api) -> Optional[str]:
    """The key to send to *api*, or None when there is no token file (a client's view)."""
    if not token_file:
        return None
    return read_token_file(token_file).key(api)
