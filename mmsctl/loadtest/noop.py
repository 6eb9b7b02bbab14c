"""``--noop``: put a model that does nothing on the target, measure, and always take it away again.

The archive (``MAR-INF/MANIFEST.json`` plus a ten-line handler, built with
:func:`mmsctl.archive.create_archive`) loads in MMS 1.1, TorchServe 0.12 and
mmsctl alike: all three call ``module:function`` handlers and read the same
manifest keys. How the target gets it:

* ``--noop-url LOCATION``: any register ``url`` the target accepts: a file name in
  its model store, or an http(s) URL it can download (for a remote server);
* a **local** mmsctl server (on loopback): with a model store (found in the server's
  ``state.json``), the archive is copied into it under a unique name for the register call
  (the server extracts it then; an absolute path outside its store is refused); without one,
  the archive's absolute path;
* a **local** MMS or TorchServe: an http URL served, for the register call only, by
  a one-file HTTP server on 127.0.0.1 with an unguessable path. (TorchServe copies a
  downloaded archive into its model store and deletes it again on unregister.)

A remote target without ``--noop-url`` is a usage error that says what to do.
"""

from __future__ import annotations

import http.server
import ipaddress
import secrets
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional
from urllib.parse import urlsplit

from mmsctl.errors import MmsError, RequestTimeout, UsageError

if TYPE_CHECKING:  # pragma: no cover
    from mmsctl.client.contexts import Context

__all__ = ["NOOP_ARCHIVE_NAME", "NOOP_HANDLER", "ArchiveServer", "build_noop_archive", "is_loopback",
           "NoopArchiveNeeded", "NoopStoreNotWritable", "noop_model"]


class NoopArchiveNeeded(UsageError):
    """The no-op archive cannot be placed where the target loads it: the user has to put it there."""

    reference = "bench-noop-archive-needed"


class NoopStoreNotWritable(NoopArchiveNeeded):
    """The local server's model store cannot take the no-op archive: the user has to put it there."""

    reference = "bench-noop-store-not-writable"

NOOP_ARCHIVE_NAME = "mmsctl-noop.mar"
NOOP_HANDLER = '''"""mmsctl bench's no-op model: answers every request with an empty body, loads nothing."""


def handle(data, context):
    if not data:  # MMS and TorchServe call the handler once with no data when a worker starts
        return None
    return [b"" for _ in data]
'''
_READY_TIMEOUT_S = 60.0


def build_noop_archive(export_dir: Path, name: str = NOOP_ARCHIVE_NAME) -> Path:
    """Write the no-op ``.mar`` to *export_dir*/*name* (replaced if there) and return its path."""
    from mmsctl.archive import create_archive

    export_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mmsctl-noop-") as scratch:
        src = Path(scratch) / "noop"
        src.mkdir()
        (src / "noop_service.py").write_text(NOOP_HANDLER, encoding="utf-8")
        made = create_archive(src, model_name="noop", handler="noop_service:handle", export_path=Path(scratch),
                              force=True, description="mmsctl bench no-op model")
        target = export_dir / name
        shutil.copyfile(made.path, target)
    return target


def is_loopback(url: str) -> bool:
    """True when *url*'s host is this machine (127.0.0.0/8, ::1 or localhost)."""
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ArchiveServer:
    """Serve one file on ``http://127.0.0.1:PORT/<secret>/<name>`` until closed (nothing else answers)."""

    def __init__(self, path: Path, name: str) -> None:
        data = path.read_bytes()
        route = f"/{secrets.token_hex(8)}/{name}"

        class _Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                if self.path != route:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # quiet
                pass

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}{route}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="noop-archive", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "ArchiveServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _wait_until_serving(predict: Callable[[], object], name: str, server: str) -> None:
    """Until a real prediction answers (MMS says READY about a second before a worker serves)."""
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while True:
        try:
            predict()
            return
        except MmsError as exc:
            if time.monotonic() >= deadline:
                raise RequestTimeout(f"the no-op model {name} on {server} did not answer within "
                                     f"{_READY_TIMEOUT_S:g} s: {exc.message}") from None
        time.sleep(0.25)


@contextmanager
def noop_model(
    context: "Context",
    kind: str,
    *,
    name: str,
    workers: int = 1,
    location: Optional[str] = None,
    archive_dir: Path,
    on_message: Callable[[str], None] = lambda _m: None,
    on_warning: Callable[[str], None] = lambda _m: None,
) -> Iterator[str]:
    """Register the no-op model as *name*, wait until it answers, yield *name*, then unregister it.

    The unregister runs however the block ends (an error, Ctrl-C); if it fails the
    warning says how to remove the model by hand.

    Raises:
        UsageError: a remote target and no *location* (``--noop-url``).
        ClientError: the register failed (model API disabled, name taken, refused token, ...).
    """
    from mmsctl.client.inference import InferenceClient
    from mmsctl.client.management import ManagementClient

    if workers < 1 or workers > 64:
        raise UsageError("no-op workers must be 1 to 64", param="workers")
    management = ManagementClient(context, timeout=30.0, retries=1)
    inference = InferenceClient(context, timeout=5.0, retries=0)
    registered = False
    try:
        with _location(context, kind, location, archive_dir) as url:
            on_message(f"registering the no-op model {name} on {management.server} ({workers} worker(s))")
            management.register(url, model_name=name, initial_workers=workers, synchronous=True)
            registered = True
        if context.protocol == "v2":  # the inference port may speak v2 only
            from mmsctl.client.v2 import V2Client

            v2 = V2Client(context, timeout=5.0, retries=0)
            try:
                _wait_until_serving(lambda: v2.predict(name, b""), name, management.server)
            finally:
                v2.close()
        else:
            _wait_until_serving(lambda: inference.predict(name, b""), name, management.server)
        yield name
    finally:
        try:
            if registered:
                try:
                    management.unregister(name, timeout=60.0)
                    on_message(f"unregistered the no-op model {name}")
                except MmsError as exc:
                    on_warning(f"could not remove the no-op model {name}: {exc.message}; "
                               f"unregister {name} from context {context.name} by hand")
        finally:
            management.close()
            inference.close()


def _local_model_store(context: "Context") -> Optional[Path]:
    """The model store of the local mmsctl server behind *context* (from its ``state.json``), if it has one."""
    from mmsctl.local_servers import list_instances

    for instance in list_instances():
        state = instance.running_state()
        if state is not None and state.model_store and \
                state.management_url.rstrip("/") == context.management_url.rstrip("/"):
            return Path(state.model_store)
    return None


@contextmanager
def _location(context: "Context", kind: str, location: Optional[str], archive_dir: Path) -> Iterator[str]:
    """The register ``url`` for the no-op archive on this target (see the module docstring)."""
    if location:
        yield location
        return
    if not is_loopback(context.management_url):
        raise NoopArchiveNeeded(
            f"a no-op model on a remote server ({urlsplit(context.management_url).netloc}) needs the archive's "
            "location", param="location",
            hint=f"copy the no-op archive into the server's model store and give its name {NOOP_ARCHIVE_NAME} "
                 "(or host it and give its http(s) URL)")
    archive = build_noop_archive(archive_dir)
    if kind == "mmsctl":
        store = _local_model_store(context)
        if store is None:
            yield str(archive.resolve())
            return
        placed = store / f"mmsctl-noop-{secrets.token_hex(4)}.mar"
        try:
            shutil.copyfile(archive, placed)
        except OSError as exc:
            raise NoopStoreNotWritable(f"cannot put the no-op archive into the server's model store {store}: "
                                       f"{exc.strerror or exc}",
                                       hint="copy the no-op archive there and give its name") from None
        try:
            yield placed.name
        finally:
            placed.unlink(missing_ok=True)
        return
    # MMS and TorchServe download http(s) URLs; TorchServe stores the file under the URL's last
    # segment, so make it unique to this run.
    with ArchiveServer(archive, f"mmsctl-noop-{secrets.token_hex(4)}.mar") as served:
        yield served.url
