"""Helpers for the `mmsctl lambda` tests against moto: a small archive, a pushed image, AWS's view of a function.

moto cannot run docker, so :func:`pushed_image` leaves in ECR what `mmsctl lambda build
--push` leaves there: the repository it creates (through the same code) and an image
manifest under a tag (what `docker push` uploads).
"""

from __future__ import annotations

import hashlib
import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import boto3

from tests.support.cli import run_here
from tests.support.mmsctl_server import make_noop_archive
from tests.support.paths import REPO

__all__ = ["aws_calls_recorded", "noop_mar", "policy_doc", "pushed_image", "tags_of"]


def noop_mar(folder: Path, name: str = "noop") -> Path:
    """A real .mar of a tiny echo handler, made with `mmsctl archive create` in this process (deploy only uploads
    it; a `python -m mmsctl` for each was ~40 processes of the cloud tests)."""
    src = make_noop_archive(folder / f"{name}-src", name)
    done = run_here("archive", "create", str(src), "--model-name", name, "--handler", "noop_service:handle",
                    "--export-path", str(folder), "--force", cwd=REPO)
    assert done.returncode == 0, done.stderr
    return folder / f"{name}.mar"


def pushed_image(name: str, tag: str = "latest") -> str:
    """What `mmsctl lambda build --push --name NAME` leaves in ECR; the image's digest."""
    from mmsctl.cloud.aws.session import open_session
    from mmsctl.cloud.lambda_.repository import ensure_repository

    ensure_repository(open_session(), name)
    layer = hashlib.sha256(f"{name}:{tag}".encode()).hexdigest()
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": {"mediaType": "application/vnd.docker.container.image.v1+json", "size": 1234,
                           "digest": f"sha256:{layer}"},
                "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip", "size": 5678,
                            "digest": f"sha256:{layer[::-1]}"}]}
    put = boto3.client("ecr").put_image(repositoryName=f"mmsctl-lambda/{name}", imageManifest=json.dumps(manifest),
                                        imageTag=tag)
    return str(put["image"]["imageId"]["imageDigest"])


def tags_of(tag_list: Any) -> dict[str, str]:
    if isinstance(tag_list, dict):
        return dict(tag_list)
    return {t["Key"]: t["Value"] for t in tag_list or []}


def policy_doc(raw: Any) -> dict[str, Any]:
    return json.loads(raw) if isinstance(raw, str) else dict(raw)


@contextmanager
def aws_calls_recorded() -> Iterator[tuple[str, list[str]]]:
    """An 'AWS endpoint' on loopback that records every request and answers 500: (its URL, the requests)."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _any(self) -> None:
            seen.append(f"{self.command} {self.path} {self.headers.get('X-Amz-Target', '')}".strip())
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _any  # noqa: N815

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
