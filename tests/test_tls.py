"""mmsctl.tls: the CA store every HTTPS client of mmsctl verifies with, loaded once per process."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl import tls
from mmsctl.addresses import ENV_ALLOW
from mmsctl.predict.fetch import fetch_url
from tests.predict.tls import make_ca
from tests.support.imageserver import serving_images


@pytest.fixture
def loads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[object]]:
    """Each CA store load in this process from now on (a fresh cache: the first call loads)."""
    seen: list[object] = []
    real = ssl.SSLContext.load_verify_locations

    def counting(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        seen.append(args or kwargs)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counting)
    tls._context.cache_clear()
    yield seen
    tls._context.cache_clear()


def test_fetches_load_the_store_once_and_it_verifies(loads: list[object], tmp_path: Path, kitten_jpg: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx loads certifi's ~150 certificates for each client it makes (20-30 ms); three URL inputs load them
    once, into a context that verifies certificates and host names."""
    monkeypatch.setenv(ENV_ALLOW, "127.0.0.1")
    (tmp_path / "kitten.jpg").write_bytes(kitten_jpg.read_bytes())
    with serving_images(tmp_path) as base:
        for _ in range(3):
            assert fetch_url(f"{base}/img/kitten.jpg", max_bytes=1 << 20, timeout=10) == kitten_jpg.read_bytes()
    assert len(loads) == 1
    shared = tls.verify()
    assert shared is tls.verify() and isinstance(shared, ssl.SSLContext)
    assert shared.verify_mode == ssl.CERT_REQUIRED and shared.check_hostname
    assert shared.cert_store_stats()["x509_ca"] > 50


def test_anything_but_true_is_given_back_as_it_is(loads: list[object]) -> None:
    own = ssl.create_default_context()
    loads.clear()
    assert tls.verify(False) is False and tls.verify(own) is own and loads == []


def test_with_trust_env_the_store_follows_ssl_cert_file(loads: list[object], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """As httpx reads it (trust_env): a CA file named in SSL_CERT_FILE is the store; without trust_env it is not
    read; a change to the variable is a new context, not the old one."""
    ca = make_ca(tmp_path, "example.test")
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca.ca_pem))
    own_store = tls.verify(trust_env=True)
    assert own_store.cert_store_stats()["x509_ca"] == 1
    assert tls.verify().cert_store_stats()["x509_ca"] > 50  # trust_env off: certifi's, whatever the variable says
    monkeypatch.delenv("SSL_CERT_FILE")
    assert tls.verify(trust_env=True) is not own_store
    assert tls.verify(trust_env=True).cert_store_stats()["x509_ca"] > 50


def test_the_tests_own_httpx_calls_share_the_store(loads: list[object], tmp_path: Path) -> None:
    """tests/support/shared_tls.py, in force in every test process: a client per call, one load."""
    import httpx

    (tmp_path / "a.txt").write_text("a")
    with serving_images(tmp_path) as base:
        for _ in range(3):
            assert httpx.get(f"{base}/img/a.txt", timeout=10).status_code == 200
    assert len(loads) <= 1
