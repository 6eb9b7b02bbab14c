"""What an EC2 instance gives its boot script, played on this machine: the instance-metadata service
(IMDSv2: a token first, then the role's credentials), and `systemctl`/`apt-get`/`dnf`/`useradd` shims.

The `systemctl` shim does what systemd would with mmsctl.service: `enable --now` reads the unit from
``$SHIM_UNIT_DIR``, runs its ``ExecStartPre`` and starts its ``ExecStart`` in the background with its
``Environment=`` (pid in ``$SHIM_STATE/mmsctl.pid``, output in ``$SHIM_STATE/mmsctl.log``). The
package managers only record what they were asked (``$SHIM_STATE/calls``): a boot that needs them
shows in that file.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

__all__ = ["serving_imds", "write_shims"]

_SYSTEMCTL = r'''#!/bin/bash
# systemctl, as the boot script uses it: daemon-reload, enable --now UNIT.
echo "systemctl $*" >> "$SHIM_STATE/calls"
[ "$1" = "enable" ] || exit 0
unit="$SHIM_UNIT_DIR/${@: -1}"
envs=(); pre=(); start=""
while IFS= read -r line; do
  case "$line" in
    Environment=*) envs+=("${line#Environment=}") ;;
    ExecStartPre=*) pre+=("${line#ExecStartPre=}") ;;
    ExecStart=*) start="${line#ExecStart=}" ;;
  esac
done < "$unit"
for cmd in "${pre[@]}"; do env "${envs[@]}" $cmd; done
env "${envs[@]}" setsid $start > "$SHIM_STATE/mmsctl.log" 2>&1 < /dev/null &
echo $! > "$SHIM_STATE/mmsctl.pid"
'''
_RECORDER = '''#!/bin/sh
echo "$(basename "$0") $*" >> "$SHIM_STATE/calls"
'''


def write_shims(folder: Path) -> Path:
    """The shims in *folder* (put it first on PATH); returns *folder*."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("systemctl", _SYSTEMCTL), ("apt-get", _RECORDER), ("dnf", _RECORDER), ("useradd", _RECORDER)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


@contextmanager
def serving_imds(credentials: dict[str, str], role: str = "mmsctl-fleet-boot") -> Iterator[str]:
    """IMDSv2 on a free loopback port: PUT a token, then the role and its keys (a GET without the token is 401)."""
    token = "imds-token-for-tests"

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

        def _answer(self, status: int, body: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_PUT(self) -> None:  # noqa: N802
            ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            self._answer(200 if ok else 400, token if ok else "")

        def do_GET(self) -> None:  # noqa: N802
            if self.headers.get("X-aws-ec2-metadata-token") != token:
                self._answer(401, "")
                return
            base = "/latest/meta-data/iam/security-credentials/"
            if self.path == base:
                self._answer(200, role)
            elif self.path == base + role:
                self._answer(200, json.dumps({"Code": "Success", "Type": "AWS-HMAC", **credentials}))
            else:
                self._answer(404, "")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
