"""The tests' own HTTP calls verify with mmsctl's one CA store (mmsctl.tls) instead of loading one each.

``httpx.get(...)``/``httpx.post(...)`` make a client per call, and each client loads certifi's CA store for its
SSL context even to talk http:// to loopback: 20-30 ms of CPU a call, a tenth of the test processes' CPU over
the suite (py-spy). The product's clients share one context (mmsctl.tls); this has httpx's transports do the
same for the default setting (``verify=True``, no client certificate) in a test process. Any other setting,
a test's own CA included, is built as httpx builds it.
"""

from __future__ import annotations

from typing import Any

__all__ = ["share_default_tls"]


def share_default_tls() -> None:
    import httpx._transports.default as transports

    from mmsctl import tls

    if getattr(transports, "_tests_share_tls", False):
        return
    build = transports.create_ssl_context

    def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is True and cert is None:
            return tls.verify(True, trust_env=trust_env)
        return build(verify=verify, cert=cert, trust_env=trust_env)

    transports.create_ssl_context = create_ssl_context  # type: ignore[assignment]
    transports._tests_share_tls = True  # type: ignore[attr-defined]
