"""`lambda invoke NAME --url`: the function URL called over HTTP, SigV4-signed for AWS_IAM, against a stand-in
that checks the signature as AWS does (tests/support/sigv4_standin.py) and runs the real handler with the real
SqueezeNet; `--cors` on moto."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from mmsctl.addresses import AllowList
from mmsctl.lambda_.runtime import Runtime
from mmsctl.lambda_.served_model import ServedModel
from mmsctl.lambda_.settings import HandlerSettings
from tests.support.moto import Moto
from tests.cloud.lambda_support import noop_mar, pushed_image
from tests.support.cli import run_here, run_mmsctl
from tests.support.imageserver import serving_images
from tests.support.paths import KITTEN_JPG, REPO, require_shared
from tests.support.sigv4_standin import serving_function_url, verify

NAME = "kitten"


@pytest.fixture(scope="module")
def expected(squeezenet_archive: Path) -> list[dict[str, Any]]:
    done = run_here("predict", str(squeezenet_archive), str(require_shared(KITTEN_JPG)), "-o", "json", cwd=REPO)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _runtime(served: ServedModel) -> Runtime:
    settings = HandlerSettings(model="(loaded)", fetch_allow=AllowList.parse("127.0.0.1"))  # the test image server
    return Runtime(settings, served, lambda: boto3.client("s3"))


@pytest.fixture(scope="module")
def mar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return noop_mar(tmp_path_factory.mktemp("mar"))


def _deploy(capsys: pytest.CaptureFixture[str], mar: Path, *args: str) -> None:
    pushed_image(NAME)
    code, _, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", str(mar), "--function-url", *args)
    assert code == 0, err


def test_an_iam_url_is_called_signed_in_every_shape(moto: Moto, capsys, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                                     served: ServedModel, expected: list[dict[str, Any]],
                                                     tmp_path: Path, mar: Path) -> None:
    _deploy(capsys, mar)
    kitten = require_shared(KITTEN_JPG)
    shutil.copy(kitten, tmp_path / "kitten.jpg")
    with serving_function_url(_runtime(served).handle) as url, serving_images(tmp_path) as images:
        monkeypatch.setenv("MMSCTL_LAMBDA_FUNCTION_URL", url.url)
        shapes = [(str(kitten),), ("--image-url", f"{images}/img/kitten.jpg"),
                  ("--image-url", f"{images}/img/kitten.jpg", "--post")]
        for shape in shapes:
            code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", *shape, "-o", "json")
            assert code == 0, (shape, err)
            assert json.loads(out)["result"] == expected, shape
        assert [s.refused for s in url.seen] == [None, None, None]
        from urllib.parse import quote, urlencode

        assert [(s.method, s.query, s.headers.get("content-type")) for s in url.seen] == [
            ("POST", "", "image/jpeg"), ("GET", urlencode({"url": f"{images}/img/kitten.jpg"}, quote_via=quote), None),
            ("POST", "", "application/json")]
        assert json.loads(url.seen[2].body) == {"url": f"{images}/img/kitten.jpg"}
        assert url.seen[0].body == kitten.read_bytes()

        # another secret: AWS answers 403, and so does the stand-in; one clear line
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
        code, _, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", str(kitten))
        assert code != 0 and err.startswith("error: ") and "403 Forbidden" in err, err
        assert url.seen[-1].refused == "signature does not match"


def test_the_stand_in_refuses_what_aws_refuses(moto: Moto) -> None:  # noqa: F811
    """Tampered body, stale date, wrong service or region, no token: each refused; the untouched request passes."""
    from mmsctl.cloud.aws.session import open_session

    aws = open_session()
    target = "http://127.0.0.1:9/?url=https%3A%2F%2Fexample.com%2Fa%20b.jpg&topk=3"
    body = b'{"url": "https://example.com/a.jpg"}'
    headers = {k.lower(): v for k, v in aws.sigv4_headers("POST", target, body=body,
                                                        headers={"content-type": "application/json"}).items()}
    headers.update({"host": "127.0.0.1:9", "content-type": "application/json"})
    query = target.split("?", 1)[1]

    def check(**change: Any) -> Any:
        args = {"method": "POST", "raw_path": "/", "raw_query": query, "headers": headers, "body": body,
                "access_key": "testing", "secret": "testing", "region": "us-east-1", "service": "lambda",
                "token": "testing", "now": time.time(), **change}
        return verify(**args)

    assert check() is None
    assert check(body=body.replace(b"a.jpg", b"b.jpg")) == "signature does not match"
    assert check(raw_query=query.replace("topk=3", "topk=4")) == "signature does not match"
    assert check(now=time.time() + 600) == "signature expired or not yet valid"
    assert "scope" in check(service="execute-api") and "scope" in check(region="eu-west-1")
    assert check(token="another") == "security token missing, wrong or unsigned"
    assert check(headers={k: v for k, v in headers.items() if k != "authorization"}).startswith("no AWS4")


def test_a_public_url_is_called_unsigned_and_cors_is_set(moto: Moto, capsys, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
                                                        served: ServedModel, expected: list[dict[str, Any]],
                                                        mar: Path, tmp_path: Path) -> None:
    _deploy(capsys, mar, "--public", "--cors", "https://app.example.com,http://localhost:3000")
    config = boto3.client("lambda").get_function_url_config(FunctionName=NAME)
    assert config["AuthType"] == "NONE"
    assert sorted(config["Cors"]["AllowOrigins"]) == ["http://localhost:3000", "https://app.example.com"]
    assert config["Cors"]["AllowMethods"] == ["GET", "POST"]
    with serving_function_url(_runtime(served).handle, auth="NONE") as url:
        monkeypatch.setenv("MMSCTL_LAMBDA_FUNCTION_URL", url.url)
        code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", str(require_shared(KITTEN_JPG)),
                                    "-o", "json")
        assert code == 0, err
        assert json.loads(out)["result"] == expected
        assert "authorization" not in url.seen[0].headers and "x-amz-date" not in url.seen[0].headers

        # the handler's own refusal (not an image) comes back as one line and a non-zero exit
        not_image = tmp_path / "notes.jpg"
        not_image.write_bytes(b"these are notes, not a JPEG")
        code, _, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", str(not_image))
        lines = err.strip().splitlines()
        assert code != 0 and lines[-1].startswith("error: ") and "Traceback" not in err, err
        assert lines[0].startswith("status 400 · end-to-end ") and "None" not in lines[0], err
        assert url.seen[-1].body == not_image.read_bytes()
    # nobody listening any more: one line, not a traceback
    code, _, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", str(require_shared(KITTEN_JPG)))
    assert code != 0 and err.startswith("error: ") and "Traceback" not in err and url.url in err, err
    # no URL at all: said before any HTTP request
    boto3.client("lambda").delete_function_url_config(FunctionName=NAME)
    code, _, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", str(require_shared(KITTEN_JPG)))
    assert code != 0 and "has no function URL" in err, err

    for bad in ("ftp://app.example.com", "https://app.example.com/path", "app.example.com"):
        code, _, err = run_mmsctl(capsys, "lambda", "deploy", NAME, "--model", "x.mar", "--function-url",
                                  "--cors", bad)
        assert code == 2 and "(--cors)" in err, (bad, err)


def test_a_signed_request_never_goes_over_plain_http_to_another_host(
        moto: Moto, capsys, monkeypatch: pytest.MonkeyPatch, served: ServedModel, mar: Path,  # noqa: F811
        expected: list[dict[str, Any]]) -> None:
    """A URL of plain http to a name that is not loopback (here one that DNS would send to the stand-in) is refused
    before any lookup or connection: the signature and body would travel in the clear. Loopback http still works."""
    import socket

    from mmsctl.cloud.aws.session import PlainHttpRefused, refuse_plain_http

    for fine in ("https://abc.lambda-url.us-east-1.on.aws/", "http://127.0.0.1:9000/", "http://127.8.0.1/",
                 "http://[::1]:9000/", "http://localhost:9000/"):
        refuse_plain_http(fine)
    for bad in ("http://abc.lambda-url.us-east-1.on.aws/", "http://10.0.0.8/", "http://[::ffff:10.0.0.8]/",
                "http://127.0.0.1.nip.io/", "ftp://127.0.0.1/", "https:///nohost"):
        with pytest.raises(PlainHttpRefused):
            refuse_plain_http(bad)

    _deploy(capsys, mar)
    kitten = str(require_shared(KITTEN_JPG))
    lookups: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def dns(host: Any, *args: Any, **kwargs: Any) -> Any:
        lookups.append(str(host))
        return real_getaddrinfo("127.0.0.1" if host == "fn.example.com" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", dns)
    with serving_function_url(_runtime(served).handle) as url:
        port = url.url.rsplit(":", 1)[1]
        monkeypatch.setenv("MMSCTL_LAMBDA_FUNCTION_URL", f"http://fn.example.com:{port}")
        code, _, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", kitten)
        assert code == 2, err
        assert err.startswith("error: refusing to send a signed request over plain http to fn.example.com"), err
        assert "MMSCTL_LAMBDA_FUNCTION_URL" in err
        assert url.seen == [] and "fn.example.com" not in lookups

        monkeypatch.setenv("MMSCTL_LAMBDA_FUNCTION_URL", f"http://localhost:{port}")  # loopback: signed, served
        code, out, err = run_mmsctl(capsys, "lambda", "invoke", NAME, "--url", kitten, "-o", "json")
        assert code == 0, err
        assert json.loads(out)["result"] == expected and [s.refused for s in url.seen] == [None]
