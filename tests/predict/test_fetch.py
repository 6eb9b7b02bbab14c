"""URL inputs (``mmsctl predict URL``, the Lambda handler's ``?url=``) against a real HTTP server on loopback:
every way a server can misbehave is bounded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Iterator

import pytest

from mmsctl.errors import DownloadError
from mmsctl.predict import expand_inputs
from mmsctl.addresses import ENV_ALLOW, AllowList, refusal
from mmsctl.predict.fetch import FetchError, fetch_url
from tests.support.imageserver import serving_images


@pytest.fixture
def base(tmp_path: Path, kitten_jpg: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The image server on loopback, which these tests open on purpose (the allow-list)."""
    monkeypatch.setenv(ENV_ALLOW, "127.0.0.1")
    shutil.copy(kitten_jpg, tmp_path / "kitten.jpg")
    with serving_images(tmp_path) as url:
        yield url


def _status(url: str, **kw: float) -> tuple[int, str]:
    with pytest.raises(FetchError) as info:
        fetch_url(url, max_bytes=int(kw.get("max_bytes", 1024 * 1024)), timeout=kw.get("timeout", 5.0))
    return info.value.status, info.value.type


def test_fetches_an_image_and_follows_a_few_redirects(base: str, kitten_jpg: Path) -> None:
    data = kitten_jpg.read_bytes()
    assert fetch_url(f"{base}/img/kitten.jpg", max_bytes=len(data), timeout=5) == data
    assert fetch_url(f"{base}/redirect/2", max_bytes=len(data), timeout=5) == data
    assert _status(f"{base}/redirect/5") == (502, "BadGatewayException")


def test_size_ceiling_announced_or_streamed(base: str, kitten_jpg: Path) -> None:
    assert _status(f"{base}/img/kitten.jpg", max_bytes=kitten_jpg.stat().st_size - 1) == (413, "PayloadTooLargeException")
    assert _status(f"{base}/big") == (413, "PayloadTooLargeException")
    assert _status(f"{base}/endless", max_bytes=200_000) == (413, "PayloadTooLargeException")


def test_a_slow_server_meets_the_deadline(base: str) -> None:
    assert _status(f"{base}/drip", timeout=0.5) == (504, "GatewayTimeoutException")


def test_errors_and_bad_urls(base: str) -> None:
    assert _status(f"{base}/img/nothing.jpg") == (502, "BadGatewayException")
    for bad in ("file:///etc/passwd", "ftp://127.0.0.1/x", "http://", "kitten.jpg", "http://x/" + "a" * 3000,
                "http://[::1/", "http://x:99999/", "http://x:abc/"):
        assert _status(bad) == (400, "BadRequestException"), bad
    closed = base.rsplit(":", 1)[0] + ":1"
    assert _status(f"{closed}/x.jpg")[0] == 502


def test_predict_reads_url_inputs_through_the_same_bounded_fetch(base: str, kitten_jpg: Path) -> None:
    [good, looping] = expand_inputs([f"{base}/redirect/2", f"{base}/redirect/5"])
    assert good.read() == kitten_jpg.read_bytes()
    with pytest.raises(FetchError) as info:  # an unbounded client would follow all five
        looping.read()
    assert isinstance(info.value, DownloadError) and info.value.status == 502  # predict's exit code and message



# -- only public destinations (SSRF) ----------------------------------------------------------------


@pytest.fixture
def loopback(tmp_path: Path, kitten_jpg: Path) -> Iterator[tuple[str, list[tuple[str, str]]]]:
    """The image server on loopback, NOT allowed: what a hostile ``?url=`` would aim at."""
    shutil.copy(kitten_jpg, tmp_path / "kitten.jpg")
    seen: list[tuple[str, str]] = []
    with serving_images(tmp_path, seen) as url:
        yield url, seen


class Dns:
    """A DNS stand-in: answers every name with the next of *answers* (the last one repeats), counting lookups."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.lookups: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.lookups.append(host)
        return [self.answers[min(len(self.lookups), len(self.answers)) - 1]]


def _refused(url: str, **kw: object) -> FetchError:
    with pytest.raises(FetchError) as info:
        fetch_url(url, max_bytes=1 << 20, timeout=5, **kw)  # type: ignore[arg-type]
    assert info.value.status == 403 and info.value.type == "ForbiddenException", info.value
    return info.value


def test_loopback_is_refused_before_any_connection(loopback: tuple[str, list[tuple[str, str]]]) -> None:
    url, seen = loopback
    err = _refused(f"{url}/img/kitten.jpg")
    assert "127.0.0.1 is a loopback address" in str(err) and ENV_ALLOW in str(err)
    port = url.rsplit(":", 1)[1]
    for literal in (f"http://[::ffff:127.0.0.1]:{port}/img/kitten.jpg", f"http://0x7f000001:{port}/img/kitten.jpg",
                    f"http://2130706433:{port}/img/kitten.jpg", f"http://127.1:{port}/img/kitten.jpg"):
        with pytest.raises(FetchError) as info:
            fetch_url(literal, max_bytes=1 << 20, timeout=5)
        assert info.value.status in (403, 502), (literal, info.value)  # refused, or not a name at all
    assert seen == [], "the server behind a refused URL must never see a request"


def test_a_public_name_that_resolves_to_loopback_is_refused(loopback: tuple[str, list[tuple[str, str]]]) -> None:
    url, seen = loopback
    port = url.rsplit(":", 1)[1]
    dns = Dns("127.0.0.1")
    err = _refused(f"http://images.example.com:{port}/img/kitten.jpg", resolver=dns)
    assert "images.example.com resolves to 127.0.0.1" in str(err)
    assert dns.lookups == ["images.example.com"] and seen == []


def test_metadata_and_private_addresses_are_refused_without_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every case is refused before a socket is opened: the dialler records (and fails) any attempt."""
    import socket

    dialled: list[object] = []

    def dial(address: object, *args: object, **kwargs: object) -> socket.socket:
        dialled.append(address)
        raise OSError("a refused destination was dialled")

    monkeypatch.setattr(socket, "create_connection", dial)
    dns = Dns("10.0.0.1")
    assert "instance-metadata" in str(_refused("http://169.254.169.254/latest/meta-data/iam/"))
    assert "instance-metadata" in str(_refused("http://[fd00:ec2::254]/latest/api/token"))
    assert "private" in str(_refused("http://intranet.example.com/a.jpg", resolver=dns))
    for url in ("http://[::1]/", "http://0.0.0.0/", "http://224.0.0.1/", "http://100.64.0.1/",
                "http://169.254.170.2/v2/credentials", "http://[fe80::1]/", "http://240.0.0.1/",
                "http://[::ffff:169.254.169.254]/", "http://[2002:a9fe:a9fe::]/", "http://0xa9fea9fe/",
                "https://0x7f000001/", "http://[::ffff:127.0.0.1]/"):
        _refused(url)
    assert dns.lookups == ["intranet.example.com"] and dialled == []
    # the dialler is what a fetch uses: an allowed destination does reach it
    with pytest.raises(FetchError):
        fetch_url("http://10.0.0.1:9/", max_bytes=1, timeout=5, allow=AllowList.parse("10.0.0.1"))
    assert dialled == [("10.0.0.1", 9)]


def test_the_lambda_runtime_api_stays_refused_even_when_allowed(loopback: tuple[str, list[tuple[str, str]]],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                kitten_jpg: Path) -> None:
    url, seen = loopback
    port = int(url.rsplit(":", 1)[1])
    allow = AllowList.parse("127.0.0.0/8, localhost")
    monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", f"127.0.0.1:{port}")  # as if the image server were the runtime API
    for target, dns in ((f"{url}/2018-06-01/runtime/invocation/next", None),
                        (f"http://api.example.com:{port}/img/kitten.jpg", Dns("::ffff:127.0.0.1"))):
        err = _refused(target, allow=allow, resolver=dns)
        assert "the Lambda runtime API" in str(err), err
    monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", f"localhost:{port}")
    assert "the Lambda runtime API" in str(_refused(f"http://localhost:{port}/", allow=allow, resolver=Dns("127.0.0.1")))
    assert seen == []
    monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", f"127.0.0.1:{port + 1}")  # another port of the same host: allowed
    assert fetch_url(f"{url}/img/kitten.jpg", max_bytes=1 << 20, timeout=5, allow=allow) == kitten_jpg.read_bytes()


def test_tests_can_stand_in_for_dns_at_the_module(loopback: tuple[str, list[tuple[str, str]]],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The documented hook: :data:`mmsctl.addresses.system_resolver` is looked up at each fetch."""
    from mmsctl import addresses

    url, seen = loopback
    dns = Dns("127.0.0.1")
    monkeypatch.setattr(addresses, "system_resolver", dns)
    err = _refused(f"http://images.example.com:{url.rsplit(':', 1)[1]}/img/kitten.jpg")
    assert "images.example.com resolves to 127.0.0.1, a loopback address" in str(err) and ENV_ALLOW in str(err)
    assert dns.lookups == ["images.example.com"] and seen == []


def test_the_connection_goes_to_the_address_that_was_checked(loopback: tuple[str, list[tuple[str, str]]],
                                                             kitten_jpg: Path) -> None:
    """DNS rebinding: the first answer is allowed, a second lookup would say 10.0.0.1 — there is none.

    The name does not resolve on this machine at all, so the download works only because
    the connection dials the checked address; the server still sees the name in Host."""
    url, seen = loopback
    port = url.rsplit(":", 1)[1]
    dns = Dns("127.0.0.1", "10.0.0.1")
    data = fetch_url(f"http://rebind.example.com:{port}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                     allow=AllowList.parse("127.0.0.1"), resolver=dns)
    assert data == kitten_jpg.read_bytes()
    assert dns.lookups == ["rebind.example.com"]
    assert seen == [("/img/kitten.jpg", f"rebind.example.com:{port}")]


def test_an_unreachable_answer_falls_back_to_the_next_judged_one(loopback: tuple[str, list[tuple[str, str]]],
                                                                  kitten_jpg: Path) -> None:
    """A name with two allowed answers, the first with nothing listening: the second is dialled, nothing else."""
    url, seen = loopback
    port = url.rsplit(":", 1)[1]

    def dns(host: str, port: int) -> list[str]:
        return ["127.0.0.3", "127.0.0.1"]  # the image server listens on 127.0.0.1 only

    data = fetch_url(f"http://two.example.com:{port}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                     allow=AllowList.parse("127.0.0.0/8"), resolver=dns)
    assert data == kitten_jpg.read_bytes() and seen == [("/img/kitten.jpg", f"two.example.com:{port}")]
    with pytest.raises(FetchError) as info:  # only the first answer is allowed: the name is refused as a whole
        fetch_url(f"http://two.example.com:{port}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                  allow=AllowList.parse("127.0.0.3"), resolver=dns)
    assert info.value.status == 403 and "127.0.0.1, a loopback address" in str(info.value) and len(seen) == 1


def test_every_redirect_is_checked_again(loopback: tuple[str, list[tuple[str, str]]]) -> None:
    """An allowed server redirects to loopback by address: refused, the target never asked."""
    url, seen = loopback
    port = url.rsplit(":", 1)[1]
    allowed = AllowList.parse("allowed.example.com")
    dns = Dns("127.0.0.1")
    target = f"http://127.0.0.1:{port}/img/kitten.jpg"
    err = _refused(f"http://allowed.example.com:{port}/to?u={target}", allow=allowed, resolver=dns)
    assert "127.0.0.1 is a loopback address" in str(err)
    assert [path for path, _host in seen] == [f"/to?u={target}"]


def test_the_allow_list_opens_chosen_destinations_only(loopback: tuple[str, list[tuple[str, str]]],
                                                       monkeypatch: pytest.MonkeyPatch, kitten_jpg: Path) -> None:
    url, seen = loopback
    monkeypatch.setenv(ENV_ALLOW, "10.0.0.0/8, 127.0.0.1/32")
    assert fetch_url(f"{url}/img/kitten.jpg", max_bytes=1 << 20, timeout=5) == kitten_jpg.read_bytes()
    _refused("http://169.254.169.254/")  # still not allowed: not on the list
    monkeypatch.setenv(ENV_ALLOW, "not a host!")
    with pytest.raises(Exception, match="not an address, a CIDR block or a host name"):
        fetch_url(f"{url}/img/kitten.jpg", max_bytes=1 << 20, timeout=5)


@pytest.mark.parametrize("address, why", [
    ("8.8.8.8", None), ("2606:4700::1111", None), ("127.0.0.2", "loopback"), ("10.1.2.3", "private"),
    ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"), ("::ffff:10.0.0.1", "private"),
    ("169.254.169.254", "instance-metadata"), ("fd00:ec2::254", "instance-metadata"), ("169.254.1.1", "link-local"),
    ("2002:7f00:1::", "loopback"), ("2002:a9fe:a9fe::", "instance-metadata"), ("2002:808:808::", None),
    ("100.127.255.254", "shared"), ("::", "unspecified"), ("ff02::1", "multicast"),
    ("fec0::1", "site-local"), ("192.0.0.9", "IETF"), ("192.0.0.10", "IETF"), ("192.0.0.170", "IETF"),
    ("100.100.100.200", "instance-metadata"), ("fd20:ce::254", "instance-metadata"),
    ("64:ff9b::808:808", None), ("64:ff9b::a00:1", "private"), ("64:ff9b:1::808:808", None),
    ("64:ff9b:1:2::7f00:1", "loopback"), ("::ffff:0:808:808", None), ("::ffff:0:c0a8:101", "private"),
    ("::808:808", None), ("::a00:1", "private"), ("::1", "loopback"),
])
def test_refusal_names_the_address_class(address: str, why: str | None) -> None:
    import ipaddress

    got = refusal(ipaddress.ip_address(address))
    assert (got is None) if why is None else (got is not None and why in got), got


#: What an allowed name must still never reach: the clouds' metadata and credentials endpoints, link-local
#: addresses (also inside IPv6: mapped, 6to4, NAT64 / SIIT translated, IPv4-compatible), "this host".
NEVER = ["169.254.169.254", "169.254.170.2", "169.254.170.23", "169.254.0.1", "169.254.255.254", "100.100.100.200",
         "168.63.129.16", "192.0.0.192", "fe80::1", "fe80::a9fe:a9fe", "fd00:ec2::254", "fd00:ec2::23",
         "fd20:ce::254", "::ffff:169.254.169.254", "2002:a9fe:a9fe::1", "0.0.0.0", "::",
         "64:ff9b::a9fe:a9fe", "64:ff9b:1::a9fe:a9fe", "64:ff9b:1:ab::a9fe:a9fe", "::ffff:0:a9fe:a9fe",
         "::a9fe:a9fe", "64:ff9b::a9fe:aa02"]


@pytest.mark.parametrize("address", NEVER)
def test_an_allowed_name_never_reaches_metadata_or_link_local(address: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``MMSCTL_FETCH_ALLOW=images.internal`` opens that name's private answers, never these; nor does a block."""
    import ipaddress
    import socket

    dialled: list[object] = []
    monkeypatch.setattr(socket, "create_connection", lambda address, *a, **k: dialled.append(address))
    for allow in ("images.internal", "images.internal, 0.0.0.0/0, ::/0, 169.254.0.0/16"):
        dns = Dns(address)
        err = _refused("http://images.internal/cat.jpg", allow=AllowList.parse(allow), resolver=dns)
        assert f"images.internal resolves to {ipaddress.ip_address(address)}, a" in str(err), err
        assert "no allow-list opens it" in str(err) and ENV_ALLOW not in str(err)
        assert dns.lookups == ["images.internal"]
    assert dialled == []


def test_an_allowed_name_still_reaches_private_loopback_and_shared_addresses(
        loopback: tuple[str, list[tuple[str, str]]], kitten_jpg: Path) -> None:
    """Private ranges stay open by name (an image server inside the VPC): the judged address is dialled."""
    import ipaddress

    from mmsctl.addresses import resolve

    url, seen = loopback
    allow = AllowList.parse("images.internal")
    for address in ("10.1.2.3", "192.168.0.7", "100.64.0.1", "fd12:3456::1", "fec0::1", "192.0.0.9",
                    "64:ff9b::808:808", "64:ff9b::a01:203"):
        assert resolve("images.internal", 80, allow=allow, resolver=Dns(address)) == [ipaddress.ip_address(address)]
    data = fetch_url(f"http://images.internal:{url.rsplit(':', 1)[1]}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                     allow=allow, resolver=Dns("127.0.0.1"))
    assert data == kitten_jpg.read_bytes() and seen == [("/img/kitten.jpg", f"images.internal:{url.rsplit(':', 1)[1]}")]


def test_tls_names_and_verifies_the_host_while_dialling_the_checked_address(tmp_path: Path, kitten_jpg: Path) -> None:
    """https to a name pinned to 127.0.0.1: SNI and the certificate check use the name, never the address."""
    from tests.predict.tls import make_ca, serving_images_tls

    shutil.copy(kitten_jpg, tmp_path / "kitten.jpg")
    ca = make_ca(tmp_path, "images.example.com")
    seen: list[tuple[str, str]] = []
    sni: list[str | None] = []
    allow = AllowList.parse("127.0.0.1")
    with serving_images_tls(tmp_path, ca, seen, sni) as port:
        dns = Dns("127.0.0.1", "10.0.0.1")
        data = fetch_url(f"https://images.example.com:{port}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                         allow=allow, resolver=dns, tls=ca.client_context())
        assert data == kitten_jpg.read_bytes() and dns.lookups == ["images.example.com"]
        assert sni == ["images.example.com"] and seen == [("/img/kitten.jpg", f"images.example.com:{port}")]
        with pytest.raises(FetchError) as info:  # the same server under a name its certificate does not carry
            fetch_url(f"https://other.example.com:{port}/img/kitten.jpg", max_bytes=1 << 20, timeout=5,
                      allow=allow, resolver=Dns("127.0.0.1"), tls=ca.client_context())
        assert info.value.status == 502 and "certificate" in str(info.value).lower(), info.value
        assert sni[-1] == "other.example.com" and len(seen) == 1

