"""A real moto server on 127.0.0.1 for the whole test process (reset before each test), and the environment
that points boto3 at it. One start costs about 3 s of CPU; the cloud modules used to start one each."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator
from unittest import mock

import pytest

from tests.support._proc import any_free_port
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
MOTO_SERVER = Path(sys.executable).with_name("moto_server")

FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # Never read the developer's ~/.aws.
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass
class Moto:
    url: str

    def env(self, **extra: str) -> dict[str, str]:
        """The environment for a subprocess that must only ever talk to this moto server."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(FAKE_AWS, AWS_ENDPOINT_URL=self.url, NO_COLOR="1", COLUMNS="200")
        env.update(extra)
        return env

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.url}/moto-api/reset", method="POST"), timeout=10)


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Moto]:
    if not MOTO_SERVER.exists():
        pytest.skip(f"moto_server not installed beside {sys.executable} (pip install 'moto[server]')")
    port = any_free_port()
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)], stdout=fh, stderr=fh)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        with urllib.request.urlopen(f"{url}/moto-api/", timeout=2):
            return True

    try:
        try:
            wait_until(answers, timeout=30, what="moto_server answering",
                       alive=lambda: None if proc.poll() is None else "exited")
        except (TimeoutError, RuntimeError):
            raise RuntimeError(f"moto_server did not start: {log.read_text()[-2000:]}") from None
        yield Moto(url)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def moto(moto_server: Moto, monkeypatch: pytest.MonkeyPatch) -> Iterator[Moto]:
    """A fresh moto (reset before each test), with this process's boto3 pointed at it too."""
    moto_server.reset()
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    for key, value in {**FAKE_AWS, "AWS_ENDPOINT_URL": moto_server.url}.items():
        monkeypatch.setenv(key, value)
    yield moto_server


def run_cli(moto: Moto, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` as a real subprocess against *moto*."""
    return subprocess.run(
        [sys.executable, "-m", "mmsctl", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
        env={**moto.env(), **(env or {})},
    )


def run_cli_here(moto: Moto, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mmsctl ARGS`` against *moto* as :func:`run_cli` runs it, but in this process: the console script's
    ``run()`` (its exit codes and one-line errors included) in exactly the subprocess's environment and folder.
    A new interpreter that imports boto3 and loads its service models costs one to two CPU seconds a command."""
    from mmsctl.cli.main import run

    out, err, code = io.StringIO(), io.StringIO(), 0
    cwd = os.getcwd()
    with mock.patch.dict(os.environ, {**moto.env(), **(env or {})}, clear=True), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        os.chdir(REPO)
        try:
            run(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            os.chdir(cwd)
    return subprocess.CompletedProcess(["mmsctl", *args], code, out.getvalue(), err.getvalue())


@pytest.fixture
def instance_assets(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """What `fleet create` uploads for its instances, made offline: a small wheelhouse (MMSCTL_WHEELHOUSE; the
    real one is built by pip, tests/cloud/test_boot_script.py) and the zoo's squeezenet in the cache (a no-op
    archive under its name: the bytes only travel to the bucket here)."""
    from mmsctl.zoo import cache
    from mmsctl.zoo.catalog import lookup
    from tests.cloud.lambda_support import noop_mar

    wheels = tmp_path_factory.mktemp("wheelhouse")
    for name in ("mmsctl-0.1.0-py3-none-any.whl", "numpy-1.26.4-cp310-cp310-manylinux2014_x86_64.whl"):
        (wheels / name).write_bytes(name.encode() * 100)
    monkeypatch.setenv("MMSCTL_WHEELHOUSE", str(wheels))
    entry = lookup("squeezenet")
    target = cache.zoo_path(entry.filename if entry else "squeezenet_v1.1.mar")
    target.parent.mkdir(parents=True, exist_ok=True)
    archive = noop_mar(tmp_path_factory.mktemp("zoo"), "squeezenet")
    target.write_bytes(archive.read_bytes())
    return wheels
