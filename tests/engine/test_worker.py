"""The one worker runtime: its framing, and real worker processes driven from blocking and asyncio code."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from multiprocessing.connection import Connection
from pathlib import Path

import pytest

from mmsctl.engine.protocol import RequestItem, ResponseItem
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker import (
    LOAD_FAILED,
    READY,
    RESULT,
    AsyncWorkerProcess,
    BatchResult,
    LoadFailure,
    WorkerExited,
    WorkerProcess,
    encode_frame,
    frame_parts,
    read_frame,
)
from tests.engine.helpers import handler_archive

ECHO = '''
import json, os

def handle(data, context):
    if data is None:
        return None
    out = []
    for row in data:
        body = bytes(row.get("body") or b"").decode()
        if body == "env":
            body = json.dumps({k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS",
                                                               "MXNET_MKLDNN_ENABLED")})
        if body == "crash":
            os._exit(3)
        if body == "boom":
            raise RuntimeError("boom")
        out.append(body)
    return out
'''


@pytest.fixture
def echo(tmp_path: Path) -> ServiceSpec:
    return handler_archive(tmp_path / "echo", {"echo.py": ECHO}, handler="echo:handle", model_name="echo")


def _items(*bodies: str) -> list[RequestItem]:
    return [RequestItem.from_body(f"r{i}", body.encode()) for i, body in enumerate(bodies)]


# -- framing ---------------------------------------------------------------------------------------


def test_the_asyncio_side_reads_and_writes_what_connection_does() -> None:
    """One wire format: encode_frame/read_frame are multiprocessing.connection's framing."""
    big = BatchResult([ResponseItem(body=os.urandom(5_000_000))], "RuntimeError: x")

    async def scenario() -> None:
        ours, theirs = socket.socketpair()
        conn = Connection(theirs.detach())
        reader, writer = await asyncio.open_unix_connection(sock=ours)
        received = asyncio.ensure_future(asyncio.to_thread(conn.recv))  # reads while we write
        writer.write(encode_frame((RESULT, big)))
        await asyncio.wait_for(writer.drain(), 30)
        assert await asyncio.wait_for(received, 30) == (RESULT, big)
        # A large frame goes out as header and data (no joined copy), a small one whole: the same bytes.
        assert [len(p) for p in frame_parts((READY, None))] == [len(encode_frame((READY, None)))]
        parts = frame_parts((RESULT, big))
        assert len(parts) == 2 and len(parts[0]) == 4 and b"".join(parts) == encode_frame((RESULT, big))
        received = asyncio.ensure_future(asyncio.to_thread(lambda: [conn.recv(), conn.recv()]))
        for part in (*parts, *frame_parts((READY, None))):
            writer.write(part)
        await asyncio.wait_for(writer.drain(), 30)
        assert await asyncio.wait_for(received, 30) == [(RESULT, big), (READY, None)]
        await asyncio.wait_for(asyncio.to_thread(conn.send, (READY, None)), 30)
        assert await asyncio.wait_for(read_frame(reader), 30) == (READY, None)
        conn.close()
        with pytest.raises(asyncio.IncompleteReadError):
            await asyncio.wait_for(read_frame(reader), 30)
        writer.close()

    asyncio.run(scenario())


# -- blocking side (the predict pool's) --------------------------------------------------------------


def test_a_blocking_worker_loads_then_answers_in_order(echo: ServiceSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MXNET_MKLDNN_ENABLED", "0")
    worker = WorkerProcess(echo, threads=3)
    try:
        assert worker.receive() == (READY, None)
        worker.send_batch(_items("a", "b"))
        worker.send_batch(_items("env"))
        kind, first = worker.receive()
        assert kind == RESULT and [r.body for r in first.responses] == [b"a", b"b"] and first.failure is None
        kind, second = worker.receive()
        assert json.loads(second.responses[0].body) == {
            "OMP_NUM_THREADS": "3", "MKL_NUM_THREADS": "3", "MXNET_MKLDNN_ENABLED": "0"}
        worker.send_batch(_items("boom"))
        kind, failed = worker.receive()
        assert kind == RESULT and failed.responses[0].status == 503 and failed.failure == "RuntimeError: boom"
    finally:
        worker.stop()
    assert worker.process.returncode == 0


def test_a_blocking_worker_reports_a_failed_load_then_exits(tmp_path: Path) -> None:
    bad = handler_archive(tmp_path / "bad", {"h.py": "raise ImportError('no weights here')\n"}, handler="h")
    worker = WorkerProcess(bad)
    try:
        kind, failure = worker.receive()
        assert kind == LOAD_FAILED and isinstance(failure, LoadFailure)
        assert "no weights here" in failure.message and failure.kind == "HandlerError"
        assert worker.process.wait(30) == 1
        with pytest.raises(WorkerExited, match="exit code 1"):
            worker.receive()
    finally:
        worker.stop()


# -- asyncio side (the server's) -----------------------------------------------------------------------


def test_an_async_worker_serves_until_it_dies(echo: ServiceSpec) -> None:
    async def scenario() -> None:
        worker = await AsyncWorkerProcess.start(echo, tag="[echo W-1]")
        assert await asyncio.wait_for(worker.wait_ready(), 60) is None
        worker.send([_items("x", "y")])
        (result,) = await worker.receive([_items("x", "y")])
        assert isinstance(result, BatchResult) and [r.body for r in result.responses] == [b"x", b"y"]
        worker.send([_items("crash")])
        with pytest.raises(WorkerExited):
            await worker.receive([_items("crash")])
        assert await worker.exit_code() == 3

    asyncio.run(scenario())


def test_batches_sent_in_one_frame_are_answered_each_on_its_own(echo: ServiceSpec) -> None:
    """A busy server sends several batches in one frame: each gets its own answer, in order, and a
    handler error in one fails only that one."""
    async def scenario() -> None:
        worker = await AsyncWorkerProcess.start(echo)
        assert await asyncio.wait_for(worker.wait_ready(), 60) is None
        batches = [_items("a"), _items("boom"), _items("b", "c")]
        worker.send(batches)
        outcomes = await worker.receive(batches)
        assert [r.body for r in outcomes[0].responses] == [b"a"]  # type: ignore[union-attr]
        assert isinstance(outcomes[1], BatchResult) and outcomes[1].failure == "RuntimeError: boom"
        assert outcomes[1].responses[0].status == 503
        assert [r.body for r in outcomes[2].responses] == [b"b", b"c"]  # type: ignore[union-attr]
        worker.send([_items("x"), _items("crash")])
        with pytest.raises(WorkerExited):
            await worker.receive([_items("x"), _items("crash")])
        assert await worker.exit_code() == 3

    asyncio.run(scenario())


def test_a_frame_sent_while_the_worker_is_busy_is_answered_after_the_one_it_runs(echo: ServiceSpec) -> None:
    """What the server's batches sent ahead rely on: frames are answered in the order sent, the second
    one from the worker's socket buffer as soon as the first is answered."""
    async def scenario() -> None:
        worker = await AsyncWorkerProcess.start(echo)
        assert await asyncio.wait_for(worker.wait_ready(), 60) is None
        first, second = [_items("one")], [_items("two", "three")]
        worker.send(first)
        worker.send(second)
        (a,) = await worker.receive(first)
        (b,) = await worker.receive(second)
        assert [r.body for r in a.responses] == [b"one"]  # type: ignore[union-attr]
        assert [r.body for r in b.responses] == [b"two", b"three"]  # type: ignore[union-attr]
        await worker.close(grace=30)

    asyncio.run(scenario())


def test_an_async_worker_stops_when_asked(echo: ServiceSpec) -> None:
    async def scenario() -> None:
        worker = await AsyncWorkerProcess.start(echo)
        assert await asyncio.wait_for(worker.wait_ready(), 60) is None
        await worker.close(grace=30)
        assert worker.process.returncode == 0

    asyncio.run(scenario())


def test_an_async_worker_that_cannot_load_says_why(tmp_path: Path) -> None:
    bad = handler_archive(tmp_path / "bad", {}, handler="absent:handle")

    async def scenario() -> None:
        worker = await AsyncWorkerProcess.start(bad)
        failure = await asyncio.wait_for(worker.wait_ready(), 60)
        assert failure is not None and "not found" in failure.message
        assert await worker.exit_code() == 1

    asyncio.run(scenario())



def test_a_load_failure_keeps_its_mmsctl_type_across_the_process(tmp_path: Path) -> None:
    """The parent raises what the worker raised (so the CLI can add its hint for that type)."""
    from mmsctl.errors import NoHandlerError

    nothing = handler_archive(tmp_path / "nothing", {"notes.txt": "no handler, no checkpoint"}, handler=None)
    worker = WorkerProcess(nothing)
    try:
        kind, failure = worker.receive()
    finally:
        worker.stop()
    assert kind == LOAD_FAILED
    error = failure.error()
    assert isinstance(error, NoHandlerError) and "names no handler" in error.message and error.hint


# -- a parent that leaves ------------------------------------------------------------------------------


def test_a_parent_that_leaves_while_the_worker_loads_gets_no_traceback_on_the_terminal(
        echo: ServiceSpec, capsys: pytest.CaptureFixture[str]) -> None:
    """The worker's end of the story when a Ctrl+C closes the parent as the worker starts: the model loads,
    its READY finds the connection closed, and it exits quietly instead of raising BrokenPipeError."""
    from mmsctl.engine.worker.child import EXIT_ORPHANED, serve
    from mmsctl.engine.worker.frames import LOAD

    ours, theirs = socket.socketpair()
    parent = Connection(ours.detach())
    parent.send((LOAD, (echo, "[W-1]")))
    parent.close()  # gone before the worker could answer
    child = Connection(theirs.detach())
    try:
        assert serve(child) == EXIT_ORPHANED
    finally:
        child.close()
    assert "Traceback" not in capsys.readouterr().err


def test_a_ctrl_c_as_the_pool_sets_up_a_worker_leaves_no_worker_behind(
        echo: ServiceSpec, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl+C between a pool worker's spawn and the pool knowing it: the worker is ended, not orphaned."""
    import threading

    import psutil

    from mmsctl.predict.pool import ServicePool

    before = {p.pid for p in psutil.Process().children()}

    def interrupted(self: threading.Thread) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ServicePool(echo, workers=2)
    monkeypatch.undo()
    left = [p for p in psutil.Process().children() if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE]
    assert left == []
