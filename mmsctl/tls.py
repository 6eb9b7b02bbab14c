"""The CA store that mmsctl's HTTPS clients verify servers with, loaded once per process.

httpx builds an SSL context for every client and transport it makes: certifi's certificates parsed
again each time. A context is safe to share between clients and threads, so every client
mmsctl makes passes :func:`verify`'s as httpx's ``verify``: a `predict` of many image URLs, a warm Lambda
fetching each event's URL and a zoo download with retries load the store once, not once a request.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    import ssl

__all__ = ["verify"]


def verify(setting: Any = True, *, trust_env: bool = False) -> Any:
    """What to give httpx as ``verify``: for ``True``, the process's one context with httpx's own CA store
    (certifi's; with *trust_env*, ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` where set, as httpx reads them);
    anything else (``False``, a caller's own context) as it is."""
    if setting is not True:
        return setting
    where = (os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")) if trust_env else (None, None)
    return _context(trust_env, *where)


@functools.lru_cache(maxsize=4)
def _context(trust_env: bool, cert_file: Optional[str], cert_dir: Optional[str]) -> "ssl.SSLContext":
    """One context per store (the variables are part of the key: a change to them gets a new one)."""
    import httpx

    return httpx.create_ssl_context(verify=True, trust_env=trust_env)
