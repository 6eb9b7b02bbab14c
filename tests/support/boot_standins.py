"""What an EC2 instance gives its boot script, played on this machine: the instance-metadata service
(IMDSv2: a token first, then the instance's id and region and the role's credentials), the Query APIs the
boot's agent calls (Auto Scaling's CompleteLifecycleAction, EC2's CreateTags) behind a SigV4 check, and
`systemctl`/`apt-get`/`dnf`/`useradd`/`python3` shims.

The `systemctl` shim does what systemd does with the boot script's units: `enable` records the unit in
``$SHIM_STATE/enabled`` (what systemd starts at every later boot), `start` (and `enable --now`) reads the unit
from ``$SHIM_UNIT_DIR``, runs its ``ExecStartPre`` and starts its ``ExecStart`` in the background with its
``Environment=`` and nothing of the caller's but ``PATH`` and the shims' settings (pid in
``$SHIM_STATE/UNIT.pid``, output in ``$SHIM_STATE/UNIT.log``). :func:`boot_again` starts the enabled units in
their ``After=`` order, as systemd does when a stopped instance (a warm pool's) starts again.

The package managers only record what they were asked (``$SHIM_STATE/calls``); with ``SHIM_APT_LOCKED=1``
`apt-get` answers as apt does while unattended-upgrades holds the dpkg lock. With ``SHIM_NO_VENV=1`` the
`python3` shim is an AMI's python3 without ``venv``/``ensurepip`` (everything else goes to the real one).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional
from urllib.parse import parse_qsl

from tests.support.sigv4_standin import verify

__all__ = ["INSTANCE_ID", "QueryApi", "QuietHandler", "boot_again", "running", "serving_handler", "serving_imds",
           "serving_query_api", "write_shims"]

INSTANCE_ID = "i-0123456789abcdef0"
_SYSTEMCTL = r'''#!/bin/bash
# systemctl, as the boot script uses it: daemon-reload, enable [--now] UNIT, start UNIT.
exec 3>&- 4>&-  # a unit inherits nothing of its caller's files (the boot script keeps its output in 3 and 4)
echo "systemctl $*" >> "$SHIM_STATE/calls"
unit="${@: -1}"
case "$1" in
  enable) echo "$unit" >> "$SHIM_STATE/enabled"; [ "$2" = "--now" ] || exit 0 ;;
  start) ;;
  *) exit 0 ;;
esac
envs=(); pre=(); start=""
while IFS= read -r line; do
  case "$line" in
    Environment=*) envs+=("${line#Environment=}") ;;
    ExecStartPre=*) pre+=("${line#ExecStartPre=}") ;;
    ExecStart=*) start="${line#ExecStart=}" ;;
  esac
done < "$SHIM_UNIT_DIR/$unit"
base="PATH=$PATH SHIM_STATE=$SHIM_STATE SHIM_UNIT_DIR=$SHIM_UNIT_DIR SHIM_REAL_PYTHON3=$SHIM_REAL_PYTHON3"
for cmd in "${pre[@]}"; do env -i $base "${envs[@]}" $cmd; done
env -i $base "${envs[@]}" setsid $start > "$SHIM_STATE/${unit%.service}.log" 2>&1 < /dev/null &
echo $! > "$SHIM_STATE/${unit%.service}.pid"
'''
_RECORDER = '''#!/bin/sh
echo "$(basename "$0") $*" >> "$SHIM_STATE/calls"
'''
_APT_GET = '''#!/bin/sh
echo "apt-get $*" >> "$SHIM_STATE/calls"
if [ "$SHIM_APT_LOCKED" = 1 ]; then
  echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 1234 (unattended-upgr)" >&2
  echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
  exit 100
fi
'''
_PYTHON3 = '''#!/bin/sh
if [ "$SHIM_NO_VENV" = 1 ] && [ "$1" = "-c" ] && [ "$2" = "import ensurepip, venv" ]; then
  echo "ModuleNotFoundError: No module named 'ensurepip'" >&2
  exit 1
fi
exec "$SHIM_REAL_PYTHON3" "$@"
'''


def write_shims(folder: Path) -> Path:
    """The shims in *folder* (put it first on PATH, with ``SHIM_REAL_PYTHON3`` the python3 they stand for)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in (("systemctl", _SYSTEMCTL), ("apt-get", _APT_GET), ("dnf", _RECORDER), ("useradd", _RECORDER),
                       ("python3", _PYTHON3)):
        (folder / name).write_text(text)
        (folder / name).chmod(0o755)
    return folder


def boot_again(root: Path, env: dict[str, str], *, timeout: float = 120.0) -> str:
    """Start the units the boot script enabled, in their ``After=`` order, as systemd does at a later boot (no
    user data); wait until ``mmsctl-ready`` (the report) has exited, and return its output."""
    state = root / "shim-state"
    enabled = list(dict.fromkeys((state / "enabled").read_text().split()))
    units = {u: (root / "units" / u).read_text() for u in enabled}
    order = sorted(enabled, key=lambda u: sum(other in units[u].split("After=", 1)[-1].split("\n", 1)[0]
                                              for other in enabled if other != u))
    for unit in order:
        subprocess.run(["systemctl", "start", unit], env=env, check=True, timeout=30)
    ready = int((state / "mmsctl-ready.pid").read_text())
    deadline = time.monotonic() + timeout
    while running(ready):
        if time.monotonic() > deadline:
            raise TimeoutError("mmsctl-ready did not finish")
        time.sleep(0.05)
    return (state / "mmsctl-ready.log").read_text()


def running(pid: int) -> bool:
    """Whether *pid* runs (a zombie nobody reaps, as in a container without an init, has exited)."""
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0] != "Z"
    except (ProcessLookupError, FileNotFoundError):
        return False


@contextmanager
def serving_imds(credentials: dict[str, str], role: str = "mmsctl-fleet-boot", *, instance_id: str = INSTANCE_ID,
                 region: str = "us-east-1") -> Iterator[str]:
    """IMDSv2 on a free loopback port: PUT a token, then the instance's id and region, the role and its keys
    (a GET without the token is 401)."""
    token = "imds-token-for-tests"
    base = "/latest/meta-data/"
    answers = {base + "instance-id": instance_id, base + "placement/region": region,
               base + "iam/security-credentials/": role,
               base + "iam/security-credentials/" + role: json.dumps({"Code": "Success", "Type": "AWS-HMAC",
                                                                        **credentials})}

    class Handler(QuietHandler):
        def do_PUT(self) -> None:  # noqa: N802
            ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
            self.answer(200 if ok else 400, token if ok else "")

        def do_GET(self) -> None:  # noqa: N802
            if self.headers.get("X-aws-ec2-metadata-token") != token:
                self.answer(401, "")
            else:
                self.answer(200 if self.path in answers else 404, answers.get(self.path, ""))

    with serving_handler(Handler) as url:
        yield url


@dataclass
class QueryCall:
    """One request to the Query API stand-in: the service its signature's scope names, its parameters, and
    why the signature check refused it (None: it held)."""

    service: str
    params: dict[str, str]
    refused: Optional[str]


@dataclass
class QueryApi:
    url: str
    calls: list[QueryCall] = field(default_factory=list)
    #: CompleteLifecycleAction's answer: "ok", or "no-action" (the instance is in no lifecycle wait).
    lifecycle: str = "ok"
    #: How many Auto Scaling calls are answered AWS's throttling (400 ``Throttling``: "Rate exceeded") first.
    throttled: int = 0

    def actions(self, action: str) -> list[dict[str, str]]:
        return [c.params for c in self.calls if c.params.get("Action") == action and c.refused is None]


_THROTTLING = ("<ErrorResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><Error><Type>Sender</Type>"
               "<Code>Throttling</Code><Message>Rate exceeded</Message></Error><RequestId>standin</RequestId>"
               "</ErrorResponse>")
_SERVICE_OF = {"CompleteLifecycleAction": "autoscaling", "CreateTags": "ec2"}
_NO_ACTION = ("<ErrorResponse xmlns=\"http://autoscaling.amazonaws.com/doc/2011-01-01/\"><Error><Type>Sender</Type>"
              "<Code>ValidationError</Code><Message>No active Lifecycle Action found with instance ID {id}</Message>"
              "</Error><RequestId>standin</RequestId></ErrorResponse>")


@contextmanager
def serving_query_api(credentials: dict[str, str], *, region: str = "us-east-1",
                      ec2_url: Optional[str] = None) -> Iterator[QueryApi]:
    """Auto Scaling's and EC2's Query APIs on a free loopback port, answering as AWS does once the request's
    SigV4 signature holds for the action's own service (403 ``SignatureDoesNotMatch`` otherwise).
    CreateTags goes on to *ec2_url* (moto), so the tag is there for ``mmsctl ec2 list`` to read."""
    state = QueryApi("")

    class Handler(QuietHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            params = dict(parse_qsl(body.decode()))
            service = _SERVICE_OF.get(params.get("Action", ""), "unknown")
            refused = verify("POST", self.path, "", headers, body, access_key=credentials["AccessKeyId"],
                             secret=credentials["SecretAccessKey"], region=region, service=service,
                             token=credentials.get("Token"), now=time.time())
            state.calls.append(QueryCall(service, params, refused))
            if refused:
                self.answer(403, "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code><Message>"
                                 f"{refused}</Message></Error></ErrorResponse>")
            elif service == "ec2" and ec2_url:
                forwarded = urllib.request.Request(ec2_url.rstrip("/") + "/", data=body, method="POST", headers={
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")})
                with urllib.request.urlopen(forwarded, timeout=10) as answer:  # noqa: S310 - moto on loopback
                    self.answer(answer.status, answer.read().decode())
            elif service == "autoscaling" and state.throttled > 0:
                state.throttled -= 1
                self.answer(400, _THROTTLING)
            elif service == "autoscaling" and state.lifecycle == "no-action":
                self.answer(400, _NO_ACTION.format(id=params.get("InstanceId")))
            else:
                action = params.get("Action", "")
                self.answer(200, f"<{action}Response><ResponseMetadata><RequestId>standin</RequestId>"
                                 f"</ResponseMetadata></{action}Response>")

    with serving_handler(Handler) as url:
        state.url = url
        yield state


class QuietHandler(BaseHTTPRequestHandler):
    """A stand-in's handler: HTTP/1.1, no request log, `answer(status, body)`."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@contextmanager
def serving_handler(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """*handler* on a free loopback port (its URL), until the block ends."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    # shutdown() waits out one poll: 0.5 s by default, in every test that starts this server
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
