"""A throwaway certificate authority and an HTTPS image server on loopback, for TLS through a pinned address."""

from __future__ import annotations

import datetime
import ssl
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from tests.support.imageserver import StandInServer, _handler

__all__ = ["TestCA", "make_ca", "serving_images_tls"]


@dataclass(frozen=True)
class TestCA:
    """PEM files: the CA's certificate, and one server certificate (with its key) for *names*."""

    ca_pem: Path
    cert_pem: Path
    key_pem: Path

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_pem))


def _name(text: str) -> object:
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def make_ca(folder: Path, *names: str) -> TestCA:
    """A CA and a server certificate whose subjectAltName lists *names* (DNS names only)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())

    def build(subject: object, public: object, issuer: object) -> x509.CertificateBuilder:
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public)  # type: ignore[arg-type]
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1)))

    ca = (build(_name("mmsctl test CA"), ca_key.public_key(), _name("mmsctl test CA"))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    leaf = (build(_name(names[0]), key.public_key(), ca.subject)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    out = TestCA(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    out.ca_pem.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    out.cert_pem.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    out.key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                              serialization.NoEncryption()))
    return out


@contextmanager
def serving_images_tls(root: Path, ca: TestCA, seen: list[tuple[str, str]],
                       sni: list[str | None]) -> Iterator[int]:
    """:func:`tests.support.imageserver.serving_images` over TLS; yields the port. Each handshake's SNI goes to *sni*."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(ca.cert_pem), str(ca.key_pem))
    context.sni_callback = lambda _sock, name, _ctx: sni.append(name)  # type: ignore[assignment,func-returns-value]
    server = StandInServer(("127.0.0.1", 0), _handler(root, seen))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
