"""`mmsctl lambda build`: the build context's content, its handler run through run-local, and --push without docker."""

from __future__ import annotations

import base64
import filecmp
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mmsctl
from tests.cloud.conftest import REPO, Moto, run_cli_here
from tests.cloud.lambda_support import aws_calls_recorded
from tests.lambda_.conftest import squeezenet_archive  # noqa: F401 - the fixture
from tests.support.cli import run_here


def mmsctl_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` as a real subprocess (for run-local, whose handler runs in a child of its own)."""
    return subprocess.run([sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=240)


def mmsctl_here(*args: str) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` in this process's environment, in REPO, as tests/lambda_/conftest.py's ``mmsctl`` runs it
    without *env*; in this process: no interpreter to start, no second MXNet to load."""
    return run_here(*args, cwd=REPO)


@pytest.fixture(scope="module")
def context(squeezenet_archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    out = tmp_path_factory.mktemp("ctx") / "build"
    proc = mmsctl_here("lambda", "build", str(squeezenet_archive), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(out / "Dockerfile")
    return out


def test_the_dockerfile_follows_awss_python_base_image_layout(context: Path) -> None:
    lines = [ln for ln in (context / "Dockerfile").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == [
        "FROM public.ecr.aws/lambda/python:3.11",
        "COPY requirements.txt ${LAMBDA_TASK_ROOT}/requirements.txt",
        "RUN pip install --no-cache-dir --require-hashes --only-binary=:all: -r ${LAMBDA_TASK_ROOT}/requirements.txt",
        "COPY task/ ${LAMBDA_TASK_ROOT}/",
        "COPY model/ /opt/mmsctl/model/",
        "ENV MMSCTL_LAMBDA_MODEL=/opt/mmsctl/model \\",
        "    MMSCTL_CACHE_DIR=/opt/mmsctl/cache \\",
        "    MMSCTL_OFFLINE=1",
        "RUN python -m mmsctl.lambda_.prepare",
        "COPY entrypoint.sh /opt/mmsctl/entrypoint.sh",
        'ENTRYPOINT ["/bin/sh", "/opt/mmsctl/entrypoint.sh"]',  # exec form: SageMaker's `docker run IMAGE serve`
        'CMD ["mmsctl.lambda_.handler.handler"]',
    ]
    pins = _pins((context / "requirements.txt").read_text())
    assert pins["mxnet"] == "1.9.1" and pins["numpy"].startswith("1.")  # numpy<2: mxnet 1.9.1 needs it
    assert {"aiohttp", "httptools", "uvloop"} <= set(pins)  # SageMaker's `serve`: the server's front end
    assert not {"textual", "typer", "rich", "pytest", "moto", "prometheus-client"} & set(pins)  # nothing else


def _pins(text: str) -> dict[str, str]:
    """name -> version of a hash-locked requirements file; every pin must carry a sha256."""
    import re

    entries = re.findall(r"^([a-z0-9-]+)==(\S+) \\\n    --hash=sha256:[0-9a-f]{64}$", text, re.MULTILINE)
    pinned = [ln for ln in text.splitlines() if "==" in ln and not ln.startswith("#")]
    assert len(entries) == len(pinned), "a pin without its hash"
    return dict(entries)


def test_the_context_holds_this_mmsctl_and_the_extracted_model(context: Path, squeezenet_archive: Path) -> None:  # noqa: F811
    source = Path(mmsctl.__file__).parent
    copied = context / "task" / "mmsctl"
    compare = filecmp.dircmp(source, copied, ignore=["__pycache__"])
    assert not compare.left_only and not compare.right_only and not compare.diff_files
    assert (copied / "lambda_" / "handler.py").read_bytes() == (source / "lambda_" / "handler.py").read_bytes()
    assert (context / "model" / "MAR-INF" / "MANIFEST.json").is_file()
    assert (context / "model" / "squeezenet_v1.1-0000.params").is_file()
    manifest = json.loads((context / "mmsctl-lambda.json").read_text())
    assert manifest["handler"] == "mmsctl.lambda_.handler.handler" and manifest["baked"] is True


def test_run_local_build_imports_the_handler_from_the_context(context: Path, kitten_jpg: Path, tmp_path: Path) -> None:
    event = {"version": "2.0", "rawPath": "/", "headers": {"content-type": "image/jpeg"},
             "requestContext": {"http": {"method": "POST", "path": "/"}},
             "body": base64.b64encode(kitten_jpg.read_bytes()).decode(), "isBase64Encoded": True}
    (tmp_path / "event.json").write_text(json.dumps(event))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    proc = mmsctl_cli("lambda", "run-local", "kitten", str(tmp_path / "event.json"), "--build", str(context), env=env)
    assert proc.returncode == 0, proc.stderr
    handler_file = context / "task" / "mmsctl" / "lambda_" / "handler.py"
    assert f"handler mmsctl.lambda_.handler.handler from {handler_file}" in proc.stderr
    assert f"loaded from {context / 'model'}" in proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["statusCode"] == 200
    assert json.loads(answer["body"])[0]["class"] == "n02124075 Egyptian cat"


def test_a_model_in_s3_is_pinned_in_the_image(tmp_path: Path) -> None:
    out = tmp_path / "s3ctx"
    proc = mmsctl_here("lambda", "build", "s3://models-b/zoo/squeezenet.mar", "--s3-version", "3HL4kqtJ",
                       "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = (out / "Dockerfile").read_text()
    assert "COPY model/" not in text and not (out / "model").exists()
    assert "MMSCTL_LAMBDA_MODEL=s3://models-b/zoo/squeezenet.mar \\" in text
    assert "MMSCTL_LAMBDA_MODEL_VERSION=3HL4kqtJ \\" in text

    again = mmsctl_here("lambda", "build", "s3://models-b/zoo/squeezenet.mar", "--out", str(out))
    assert again.returncode == 2 and "is not empty" in again.stderr
    assert mmsctl_here("lambda", "build", "s3://models-b/zoo/other.mar", "--out", str(out), "--force").returncode == 0
    assert "other.mar" in (out / "Dockerfile").read_text()
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("mine")
    refused = mmsctl_here("lambda", "build", "s3://b/k.mar", "--out", str(tmp_path / "precious"), "--force")
    assert refused.returncode == 2 and (tmp_path / "precious" / "notes.txt").exists()


def test_push_without_a_docker_daemon_says_so_before_any_aws_call(tmp_path: Path) -> None:
    docker = subprocess.run(["docker", "info"], capture_output=True, text=True) if _has("docker") else None
    with aws_calls_recorded() as (url, seen):
        if docker is not None and docker.returncode != 0:  # this machine: the CLI is there, the daemon is not
            proc = run_cli_here(Moto(url), "lambda", "build", "s3://b/k.mar", "--out", str(tmp_path / "a"), "--push",
                                "--name", "kitten")
            assert proc.returncode == 1
            first, hint = proc.stderr.splitlines()
            assert first.startswith("error: docker is installed but its daemon is not running (")
            assert hint.startswith(f"hint: the build context is ready in {tmp_path / 'a'}: start the daemon")
        bare = run_cli_here(Moto(url), "lambda", "build", "s3://b/k.mar", "--out", str(tmp_path / "b"), "--push",
                            "--name", "kitten", env={"PATH": str(Path(sys.executable).parent)})  # no docker, no podman
    assert bare.returncode == 1
    assert bare.stderr.splitlines()[0] == ("error: pushing an image needs docker or podman, and neither is installed "
                                           "(--push)")
    assert (tmp_path / "b" / "Dockerfile").is_file()
    assert seen == []
    assert mmsctl_here("lambda", "build", "s3://b/k.mar", "--push").stderr.startswith("error: --push needs --name")


def _has(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


def test_run_local_refuses_unclear_requests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.support.cli import one_error_line, run_mmsctl

    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "mmsctl-lambda.json").write_text('{"handler": "x.y", "surprise": 1}')
    url = ("--image-url", "http://127.0.0.1:1/x.jpg")
    cases = [
        (("--build", str(ctx), *url), "mmsctl-lambda.json: not written by this mmsctl",
         f"hint: write the context again: mmsctl lambda build MODEL --out {ctx} --force"),
        (("--build", str(tmp_path), *url), "is not a build context of `mmsctl lambda build`", None),
        (("--build", str(ctx), "--model", "m", *url), "pass --build DIR or --model MODEL, not both", None),
        (("--model", "m"), "give one event (an event file, an S3 put notification or a function-URL GET)",
         "hint: give EVENT.json, --s3-put s3://bucket/key or --url URL (or --serve)"),
        (("--model", "m", "--serve", *url), "serving answers invocations as they come: give no event with it (--serve)",
         None),
        (("--model", "m", "--image-url", "ftp://x/y.jpg"), "--image-url: url must be an http(s) URL", None),
        (("--model", "m", str(tmp_path / "none.json")), "none.json: no such file", None),
    ]
    for args, message, hint in cases:
        result = run_mmsctl(capsys, "lambda", "run-local", "kitten", *args)
        assert result.code in (2, 3) and message in one_error_line(result), (args, result.stderr)
        if hint is not None:
            assert result.stderr.splitlines()[1:] == [hint], result.stderr
