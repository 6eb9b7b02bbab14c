"""A worker process: loads one model once, then answers batches until told to stop.

Started by the supervisor as ``python -m mmsctl.server.worker FD`` with one end
of a socketpair as FD. It says ``ready`` only after the model has loaded, so a
worker counted READY can serve. Output goes to the server log.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import traceback
from typing import Any

from mmsctl.engine.spec import ServiceSpec
from mmsctl.server import protocol

__all__ = ["main"]


def _load(spec: ServiceSpec) -> Any:
    """Load the model through the engine contract (``load_service``)."""
    from mmsctl.engine.service import load_service

    return load_service(spec, server_name="mmsctl")


def _describe(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return text if type(exc).__module__.startswith("mmsctl") else f"{type(exc).__name__}: {text}"


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    # The server decides when a worker stops; Ctrl+C in a foreground server must not kill us first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    first = protocol.read_frame_blocking(sock)
    if first is None or first[0] != protocol.LOAD:
        return 2
    spec, name = first[1]
    tag = f"{name[:-1]} pid {os.getpid()}]"
    try:
        service = _load(spec)
    except BaseException as exc:  # noqa: BLE001 - every load failure is reported to the server
        print(f"{tag} model failed to load: {_describe(exc)}", file=sys.stderr, flush=True)
        if not hasattr(exc, "message"):
            traceback.print_exc(file=sys.stderr)
        sock.sendall(protocol.encode(protocol.LOAD_FAILED, _describe(exc)))
        return 1
    sock.sendall(protocol.encode(protocol.READY, os.getpid()))
    while True:
        msg = protocol.read_frame_blocking(sock)
        if msg is None or msg[0] == protocol.EXIT:
            break
        kind, batch = msg
        try:
            result = service.handle(batch)
            frame = protocol.encode(protocol.RESULT, result)
        except BaseException as exc:  # noqa: BLE001 - the batch fails, the worker lives on
            print(f"{tag} batch failed: {_describe(exc)}", file=sys.stderr, flush=True)
            frame = protocol.encode(protocol.FAILED, _describe(exc))
        sock.sendall(frame)
    try:
        service.close()
    except Exception:  # noqa: BLE001
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
