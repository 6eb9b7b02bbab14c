"""The boot's agent, as the instance runs it (the source the user data carries, loaded here): the URL and
signature of each S3 GET and Query API call (byte for byte botocore's), no signed request over plain http to
anything but loopback, no redirect followed, every manifest `dest` inside the assets folder, and the attacks on
what an instance boots from: a tampered manifest, a swapped model object, a `dest` out of the prefix.

Against moto's S3, the metadata-service stand-in and the Query API stand-in that checks signatures as AWS does
(tests/support/boot_standins.py); all in this process.
"""

from __future__ import annotations

import hashlib
import json
import socket
import types
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

import boto3
import pytest

from tests.cloud.conftest import FAKE_AWS, Moto
from tests.support.boot_standins import INSTANCE_ID, serving_imds, serving_query_api

KEYS = {"AccessKeyId": FAKE_AWS["AWS_ACCESS_KEY_ID"], "SecretAccessKey": FAKE_AWS["AWS_SECRET_ACCESS_KEY"],
        "Token": FAKE_AWS["AWS_SESSION_TOKEN"]}


@pytest.fixture(scope="module")
def agent() -> types.ModuleType:
    """The agent exactly as the boot script writes it to /opt/mmsctl/boot.py (comments and docstrings out)."""
    from mmsctl.cloud.instance.userdata import agent_source

    module = types.ModuleType("mmsctl_boot_agent")
    exec(compile(agent_source(), "boot.py", "exec"), module.__dict__)  # noqa: S102 - the agent is ours
    return module


@pytest.fixture
def console(agent: types.ModuleType, tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "console"
    agent.CONF["console"] = str(path)
    yield path
    agent.CONF["console"] = "/dev/console"


def _botocore_signature(method: str, url: str, headers: dict[str, str], body: bytes, service: str,
                        region: str) -> str:
    """botocore's signature of the same request at the same instant (S3's signer for S3: no double encoding)."""
    from botocore.auth import S3SigV4Auth, SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    creds = Credentials(KEYS["AccessKeyId"], KEYS["SecretAccessKey"], KEYS["Token"])
    signer = (S3SigV4Auth if service == "s3" else SigV4Auth)(creds, service, region)
    request = AWSRequest(method=method, url=url, data=body,
                         headers={k: v for k, v in headers.items() if k != "authorization"})
    request.context["timestamp"] = headers["x-amz-date"]
    canonical = signer.canonical_request(request)
    return str(signer.signature(signer.string_to_sign(request, canonical), request))


@pytest.mark.parametrize(("bucket", "key", "region", "style", "version", "url"), [
    ("models", "prod/resnet.mar", "eu-west-1", "virtual", None,
     "https://models.s3.eu-west-1.amazonaws.com/prod/resnet.mar"),
    # dots: the *.s3.REGION certificate covers one label only, so the bucket goes in the path
    ("my.models", "prod/resnet.mar", "us-west-2", "path", None,
     "https://s3.us-west-2.amazonaws.com/my.models/prod/resnet.mar"),
    # the China partition's own domain
    ("models", "r.mar", "cn-north-1", "virtual", None, "https://models.s3.cn-north-1.amazonaws.com.cn/r.mar"),
    ("models", "été/a b+c.mar", "ap-south-1", "virtual", "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY",
     "https://models.s3.ap-south-1.amazonaws.com/%C3%A9t%C3%A9/a%20b%2Bc.mar?versionId=3HL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY"),
])
def test_each_model_is_fetched_in_the_form_and_region_that_work(
        agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch, bucket: str, key: str, region: str, style: str,
        version: str | None, url: str) -> None:
    monkeypatch.delenv("MMSCTL_S3_ENDPOINT", raising=False)
    assert agent.s3_url(bucket, key, region, style, version) == url
    headers = agent.sign("GET", url, region, "s3", KEYS)
    scope = headers["authorization"].split("Credential=")[1].split(",")[0]
    assert scope.split("/")[2:] == [region, "s3", "aws4_request"]  # signed for the bucket's own region
    signature = headers["authorization"].rsplit("Signature=", 1)[1]
    assert signature == _botocore_signature("GET", url, {**headers, "host": urlsplit(url).netloc}, b"", "s3", region)


def test_query_api_calls_are_signed_as_botocore_signs_them(agent: types.ModuleType) -> None:
    body = b"Action=CompleteLifecycleAction&AutoScalingGroupName=g&Version=2011-01-01"
    url = "https://autoscaling.eu-west-1.amazonaws.com/"
    headers = agent.sign("POST", url, "eu-west-1", "autoscaling", KEYS, body,
                         {"content-type": "application/x-www-form-urlencoded; charset=utf-8"})
    assert "x-amz-content-sha256" not in headers  # S3's header only
    signature = headers["authorization"].rsplit("Signature=", 1)[1]
    assert signature == _botocore_signature("POST", url, {**headers, "host": urlsplit(url).netloc}, body,
                                            "autoscaling", "eu-west-1")
    assert agent.endpoint("ec2", "cn-northwest-1") == "https://ec2.cn-northwest-1.amazonaws.com.cn"


def test_a_signed_request_never_goes_over_plain_http_to_another_host(
        agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Refused before any connection: the test hooks may point at loopback over http, nothing else may."""
    connects: list[Any] = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connects.append(a) or pytest.fail("connected"))
    for host in ("203.0.113.9:9", "example.com", "169.254.169.254"):
        monkeypatch.setenv("MMSCTL_S3_ENDPOINT", f"http://{host}")
        url = agent.s3_url("b", "k", "us-east-1")
        with pytest.raises(agent.Refused, match="plain http"):
            agent.download(KEYS, url, "us-east-1", str(tmp_path / "out"), 10, "s3://b/k")
        monkeypatch.setenv("MMSCTL_AUTOSCALING_ENDPOINT", f"http://{host}")
        with pytest.raises(agent.Refused, match="plain http"):
            agent.query("autoscaling", "us-east-1", KEYS, {"Action": "CompleteLifecycleAction"}, "2011-01-01")
    assert connects == [] and not (tmp_path / "out.part").exists()
    for fine in ("http://127.0.0.1:9", "http://[::1]:9", "http://localhost:9", "https://203.0.113.9"):
        agent.guard(fine)


def test_a_redirect_is_not_followed(agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """S3's 301 for another region (or anything's Location) ends the fetch there, naming S3's code; the signed
    headers never reach the other host."""
    from tests.support.boot_standins import QuietHandler, serving_handler

    seen: list[str] = []

    class Redirect(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802
            seen.append(self.path)
            body = ("<Error><Code>PermanentRedirect</Code><Message>The bucket you are attempting to access must be "
                    "addressed using the specified endpoint.</Message></Error>").encode()
            self.send_response(301)
            self.send_header("Location", "http://198.51.100.7/elsewhere")
            self.send_header("x-amz-bucket-region", "eu-west-1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    with serving_handler(Redirect) as url:
        monkeypatch.setenv("MMSCTL_S3_ENDPOINT", url)
        with pytest.raises(agent.Refused, match="HTTP 301 PermanentRedirect"):
            agent.download(KEYS, agent.s3_url("b", "k", "us-east-1"), "us-east-1", str(tmp_path / "o"), 10, "s3://b/k")
    assert seen == ["/b/k"]


@pytest.mark.parametrize("dest", ["../evil", "/etc/evil", "models/../../evil", "models//x", ".", "a\\b", ""])
def test_a_dest_outside_the_assets_folder_is_refused(agent: types.ModuleType, tmp_path: Path, dest: str) -> None:
    with pytest.raises(agent.Refused, match="manifest dest"):
        agent.place(str(tmp_path / "assets"), dest)
    assert not (tmp_path / "evil").exists()


def test_a_dest_through_a_symlink_out_of_the_folder_is_refused(agent: types.ModuleType, tmp_path: Path) -> None:
    root, outside = tmp_path / "assets", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "models").symlink_to(outside)
    with pytest.raises(agent.Refused, match="symlink"):
        agent.place(str(root), "models/x.mar")
    (root / "file.mar").symlink_to(outside / "target")
    with pytest.raises(agent.Refused, match="symlink"):
        agent.place(str(root), "file.mar")
    assert agent.place(str(root), "wheelhouse/a.whl") == str(root / "wheelhouse" / "a.whl")


# ---- the attacks on what an instance boots from, against moto's S3 ----

@pytest.fixture
def bucket_setup(moto: Moto, agent: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                 console: Path) -> Iterator[dict[str, Any]]:
    """A staged plan (one local model, one wheel, an s3:// model in a bucket of the user's), the agent pointed
    at moto and the metadata stand-in; ``conf`` is the agent's boot.json."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.instance.assets import assets_ref, plan_assets, stage_assets
    from mmsctl.cloud.instance.userdata import parse_models
    from tests.cloud.lambda_support import noop_mar

    s3 = boto3.client("s3")
    s3.create_bucket(Bucket="user-models")
    s3.put_object(Bucket="user-models", Key="prod/r.mar", Body=b"the model as it was staged")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "dep-1.0-py3-none-any.whl").write_bytes(b"wheel")
    aws = open_session()
    plan = plan_assets(parse_models([f"own={noop_mar(tmp_path, 'own')}", "r=s3://user-models/prod/r.mar"]),
                       "fleet/attack/", wheelhouse=wheels)
    ref = assets_ref(aws, plan, "3.11")
    stage_assets(aws, plan, "3.11", [], [])
    dest = tmp_path / "assets"
    with serving_imds(KEYS) as imds:
        monkeypatch.setenv("MMSCTL_IMDS_ENDPOINT", imds)
        monkeypatch.setenv("MMSCTL_S3_ENDPOINT", moto.url)
        conf = {"assets": {"bucket": ref.bucket, "prefix": ref.prefix, "region": "us-east-1", "dest": str(dest),
                           "manifest_sha256": ref.manifest_sha256}}
        yield {"s3": s3, "conf": conf, "dest": dest, "plan": plan, "ref": ref}


def test_the_staged_assets_are_fetched_and_checked(agent: types.ModuleType, bucket_setup: dict[str, Any]) -> None:
    agent.fetch(bucket_setup["conf"])
    dest = bucket_setup["dest"]
    assert (dest / "models" / "r.mar").read_bytes() == b"the model as it was staged"
    assert (dest / "wheelhouse" / "dep-1.0-py3-none-any.whl").read_bytes() == b"wheel"
    [pinned] = bucket_setup["plan"].in_place
    assert pinned["sha256"] == hashlib.sha256(b"the model as it was staged").hexdigest() and "version" not in pinned


def test_a_tampered_manifest_is_refused_before_anything_else_is_fetched(
        agent: types.ModuleType, bucket_setup: dict[str, Any]) -> None:
    ref, s3 = bucket_setup["ref"], bucket_setup["s3"]
    key = f"{ref.prefix}manifests/{ref.manifest_sha256}.json"
    manifest = json.loads(s3.get_object(Bucket=ref.bucket, Key=key)["Body"].read())
    manifest["s3"][0]["uri"] = "s3://attacker/evil.mar"
    s3.put_object(Bucket=ref.bucket, Key=key, Body=json.dumps(manifest).encode())
    with pytest.raises(agent.Refused, match="does not match the sha256 in the user data"):
        agent.fetch(bucket_setup["conf"])
    assert not (bucket_setup["dest"] / "models").exists()


@pytest.mark.parametrize(("swapped", "refusal"), [
    (b"X" * 26, "does not match the sha256 recorded"),  # the size it had
    (b"X" * 27, "larger than the 26 bytes recorded"),  # the download stops at the recorded size
])
def test_a_swapped_model_object_is_refused(agent: types.ModuleType, bucket_setup: dict[str, Any], swapped: bytes,
                                           refusal: str) -> None:
    """An unversioned bucket: the object's sha256 and size were taken when the fleet was made; other bytes are
    refused and never take the model's place."""
    bucket_setup["s3"].put_object(Bucket="user-models", Key="prod/r.mar", Body=swapped)
    with pytest.raises(agent.Refused, match=refusal):
        agent.fetch(bucket_setup["conf"])
    assert not (bucket_setup["dest"] / "models" / "r.mar").exists()


def test_a_versioned_model_is_fetched_at_its_pinned_version(
        moto: Moto, agent: types.ModuleType, bucket_setup: dict[str, Any]) -> None:
    """A versioned bucket: the version read when the fleet was made is what every instance gets, whatever is
    put at the key later."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.instance.assets import assets_ref, stage_assets

    s3, plan = bucket_setup["s3"], bucket_setup["plan"]
    s3.put_bucket_versioning(Bucket="user-models", VersioningConfiguration={"Status": "Enabled"})
    s3.put_object(Bucket="user-models", Key="prod/r.mar", Body=b"version one")
    plan.in_place[:] = [{"uri": "s3://user-models/prod/r.mar", "dest": "models/r.mar"}]
    aws = open_session()
    ref = assets_ref(aws, plan, "3.11")
    stage_assets(aws, plan, "3.11", [], [])
    assert plan.in_place[0]["version"] and "sha256" not in plan.in_place[0]
    s3.put_object(Bucket="user-models", Key="prod/r.mar", Body=b"version two, put by someone else")
    agent.fetch({"assets": {**bucket_setup["conf"]["assets"], "manifest_sha256": ref.manifest_sha256}})
    assert (bucket_setup["dest"] / "models" / "r.mar").read_bytes() == b"version one"


def test_a_manifest_dest_out_of_the_prefix_is_refused(agent: types.ModuleType, bucket_setup: dict[str, Any],
                                                      tmp_path: Path) -> None:
    """Even a manifest whose sha256 the user data carries cannot write outside the assets folder."""
    ref, s3 = bucket_setup["ref"], bucket_setup["s3"]
    wheel = f"wheels/{hashlib.sha256(b'wheel').hexdigest()}/dep-1.0-py3-none-any.whl"
    document = json.dumps({"assets": [{"key": wheel, "sha256": hashlib.sha256(b"wheel").hexdigest(), "size": 5,
                                       "dest": "../escaped.whl"}], "s3": []}).encode()
    digest = hashlib.sha256(document).hexdigest()
    s3.put_object(Bucket=ref.bucket, Key=f"{ref.prefix}manifests/{digest}.json", Body=document)
    with pytest.raises(agent.Refused, match="manifest dest '../escaped.whl'"):
        agent.fetch({"assets": {**bucket_setup["conf"]["assets"], "manifest_sha256": digest}})
    assert not (tmp_path / "escaped.whl").exists()


# ---- reporting the boot ----

@pytest.mark.parametrize(("lifecycle", "said"), [
    ("ok", "CONTINUE mmsctl-launching"),
    ("no-action", "no lifecycle action waits for this instance"),  # started outside a lifecycle wait
])
def test_the_report_tags_the_instance_and_completes_the_hook(
        agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        console: Path, lifecycle: str, said: str) -> None:
    with serving_imds(KEYS, region="eu-west-1") as imds, serving_query_api(KEYS, region="eu-west-1") as api:
        api.lifecycle = lifecycle
        monkeypatch.setenv("MMSCTL_IMDS_ENDPOINT", imds)
        monkeypatch.setenv("MMSCTL_AUTOSCALING_ENDPOINT", api.url)
        monkeypatch.setenv("MMSCTL_EC2_ENDPOINT", api.url)
        agent.report({"hook": {"group": "mmsctl-fleet-p", "name": "mmsctl-launching"}}, "ready", "CONTINUE")
    out = capsys.readouterr().out
    assert said in out and "could not" not in out and "FAILED" not in out
    assert [c.refused for c in api.calls] == [None, None]  # both signed for their own service and region
    assert api.actions("CreateTags") == [{"Action": "CreateTags", "ResourceId.1": INSTANCE_ID,
                                          "Tag.1.Key": "mmsctl:boot", "Tag.1.Value": "ready", "Version": "2016-11-15"}]
    assert api.actions("CompleteLifecycleAction") == [{
        "Action": "CompleteLifecycleAction", "AutoScalingGroupName": "mmsctl-fleet-p",
        "LifecycleHookName": "mmsctl-launching", "InstanceId": INSTANCE_ID, "LifecycleActionResult": "CONTINUE",
        "Version": "2011-01-01"}]


def test_a_throttled_lifecycle_call_is_tried_again(agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], console: Path) -> None:
    """Auto Scaling throttles with HTTP 400 `Throttling` ("Rate exceeded"), not a 5xx: the healthy instance's
    CONTINUE is sent again after a backoff, not lost (the hook's DefaultResult would ABANDON it)."""
    waits: list[float] = []
    monkeypatch.setattr(agent, "_sleep", waits.append)
    with serving_imds(KEYS, region="eu-west-1") as imds, serving_query_api(KEYS, region="eu-west-1") as api:
        api.throttled = 1
        for name in ("IMDS", "AUTOSCALING", "EC2"):
            monkeypatch.setenv(f"MMSCTL_{name}_ENDPOINT", imds if name == "IMDS" else api.url)
        agent.report({"hook": {"group": "mmsctl-fleet-p", "name": "mmsctl-launching"}}, "ready", "CONTINUE")
    out = capsys.readouterr().out
    assert "CONTINUE mmsctl-launching" in out and "could not" not in out
    assert [c.params["Action"] for c in api.calls] == ["CreateTags", "CompleteLifecycleAction",
                                                       "CompleteLifecycleAction"]
    assert api.actions("CompleteLifecycleAction")[-1]["LifecycleActionResult"] == "CONTINUE"
    assert waits == [1]


def test_the_wait_is_for_readiness_not_for_ping(agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str], console: Path) -> None:
    """The mmsctl server answers /ping while its models load; the boot is reported only once READY_PATH answers
    200 (every model with a READY worker), and as failed when it never does within the wait."""
    from mmsctl.cloud.instance.server_image import READY_PATH
    from tests.support.boot_standins import QuietHandler, serving_handler

    asked: list[str] = []

    class Server(QuietHandler):
        def do_GET(self) -> None:  # noqa: N802
            asked.append(self.path)
            ready = self.path == READY_PATH and asked.count(READY_PATH) >= 3
            self.answer(200 if self.path == "/ping" or ready else 503, "")

    monkeypatch.setattr(agent.time, "sleep", lambda s: None)
    with serving_handler(Server) as url, serving_imds(KEYS) as imds, serving_query_api(KEYS) as api:
        for name in ("IMDS", "AUTOSCALING", "EC2"):
            monkeypatch.setenv(f"MMSCTL_{name}_ENDPOINT", imds if name == "IMDS" else api.url)
        assert agent.ready({"ready": url + READY_PATH, "wait_s": 30, "hook": None}) == 0
        assert asked == [READY_PATH] * 3 and [c["Tag.1.Value"] for c in api.actions("CreateTags")] == ["ready"]
        now = [0.0]
        monkeypatch.setattr(agent.time, "monotonic", lambda: now.__setitem__(0, now[0] + 1) or now[0])
        asked.clear()
        assert agent.ready({"ready": url + "/never", "wait_s": 5, "hook": None}) == 1
    assert len(asked) == 4 and api.actions("CreateTags")[-1]["Tag.1.Value"].startswith(
        "failed: server: not ready (GET http://127.0.0.1:")
    assert "server ready at" in capsys.readouterr().out


def test_a_failure_is_reported_once_bounded(agent: types.ModuleType, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str], console: Path) -> None:
    """`failed STEP LINE`: the console line, the tag (control characters out, 256 characters at most), ABANDON."""
    with serving_imds(KEYS) as imds, serving_query_api(KEYS) as api:
        for name in ("IMDS", "AUTOSCALING", "EC2"):
            monkeypatch.setenv(f"MMSCTL_{name}_ENDPOINT", imds if name == "IMDS" else api.url)
        assert agent.failed({"hook": {"group": "g", "name": "h"}}, "fetch", "no such key\x1b[31m " + "x" * 400) == 1
    [tag] = api.actions("CreateTags")
    assert tag["Tag.1.Value"].startswith("failed: fetch: no such key [31m") and len(tag["Tag.1.Value"]) == 256
    assert api.actions("CompleteLifecycleAction")[0]["LifecycleActionResult"] == "ABANDON"
    assert "mmsctl-init: FAILED at fetch: no such key" in console.read_text()
