"""The admission gate both HTTP paths call, and the tickets that alone move the traffic counters. No server:
these are the rules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mmsctl.server.http.admission import Gate, Traffic
from mmsctl.server.errors import BadRequest, InvalidKey, RequestTooLarge, ServiceUnavailable

SERVER = Path(__file__).resolve().parents[2] / "mmsctl" / "server"
HOST = [(b"Host", b"x")]


def _gate(api: str = "inference", token: str = "tok", max_request_size: int = 100,
          max_buffered: int = 150) -> Gate:
    return Gate(api, token, max_request_size, Traffic(max_buffered))


def _auth(*values: bytes) -> list[tuple[bytes, bytes]]:
    return HOST + [(b"Authorization", b"Bearer " + v) for v in values]


@pytest.mark.parametrize("raw, http11", [
    ([], True),  # no Host on HTTP/1.1
    (HOST + [(b"host", b"y")], True),
    (HOST + [(b"User-Agent", b"a"), (b"USER-AGENT", b"b")], True),
    (HOST + [(b"Content-Type", b"a/b"), (b"content-type", b"a/b")], True),
    (_auth(b"WRONG", b"tok"), True),  # a reader of the last value would let it in
    (_auth(b"tok", b"WRONG"), True),
    ([(b"Host", b"x"), (b"Host", b"x")], False),
], ids=["no-host", "two-host", "two-user-agent", "two-content-type", "wrong-then-right", "right-then-wrong",
        "two-host-http10"])
def test_header_anomalies_are_a_400_before_anything_else(raw: list[tuple[bytes, bytes]], http11: bool) -> None:
    gate = _gate()
    gate.traffic.drain()  # a draining server would say 503: the anomaly is judged first
    with pytest.raises(BadRequest):
        gate.admit("POST", "/predictions/{model}", raw, http11, 5, True)
    assert gate.traffic.in_flight == 0 and gate.traffic.buffered == 0


def test_what_is_not_an_anomaly_is_admitted_with_its_headers() -> None:
    gate = _gate()
    raw = _auth(b"tok") + [(b"X-Tag", b"1"), (b"x-tag", b"2")]  # a repeated ordinary header: the last one
    with gate.admit("POST", "/predictions/{model}", raw, True, 5, True) as ticket:
        assert ticket.headers == {"host": "x", "authorization": "Bearer tok", "x-tag": "2"}
        assert (gate.traffic.in_flight, gate.traffic.buffered) == (1, 5)
    assert (gate.traffic.in_flight, gate.traffic.buffered) == (0, 0)
    ticket = gate.admit("GET", "/ping", [], False, None, False)  # HTTP/1.0 needs no Host; ping no token
    ticket.release()


def test_the_rules_in_their_order() -> None:
    gate = _gate()
    with pytest.raises(InvalidKey):
        gate.admit("POST", "/predictions/{model}", _auth(b"WRONG"), True, 500, True)
    with pytest.raises(RequestTooLarge):
        gate.admit("POST", "/predictions/{model}", _auth(b"tok"), True, 101, True)
    held = gate.admit("POST", "/predictions/{model}", _auth(b"tok"), True, 100, True)
    with pytest.raises(ServiceUnavailable):  # 100 held, 60 more would pass 150
        gate.admit("POST", "/predictions/{model}", _auth(b"tok"), True, 60, True)
    chunked = gate.admit("POST", "/predictions/{model}", _auth(b"tok"), True, None, False)  # no body: nothing held
    assert gate.traffic.buffered == 100
    chunked.release()
    held.release()
    gate.traffic.drain()
    with pytest.raises(ServiceUnavailable) as refused:
        gate.admit("POST", "/predictions/{model}", _auth(b"tok"), True, 1, True)
    assert refused.value.retry_after == 1
    gate.admit("GET", "/ping/{model}", HOST, True, None, False).release()  # health checks still answer
    management = Gate("management", "tok", 100, gate.traffic)
    management.admit("GET", "/models", _auth(b"tok"), True, None, False).release()
    with pytest.raises(ServiceUnavailable):
        management.admit("POST", "/models", _auth(b"tok"), True, None, False)


def test_a_ticket_gives_back_what_it_holds_once() -> None:
    traffic = Traffic(max_buffered=10)
    ticket = traffic.reserve(4)
    assert ticket is not None and ticket.grow(6) and not ticket.grow(1)
    assert (traffic.in_flight, traffic.buffered) == (1, 10)
    ticket.release()
    ticket.release()
    assert (traffic.in_flight, traffic.buffered) == (0, 0)
    assert not ticket.grow(1) and traffic.buffered == 0  # a released ticket holds nothing more
    partial = traffic.reserve(20, counted=False)  # alone, any size fits (max_request_size bounds it)
    assert partial is not None and traffic.in_flight == 0 and traffic.reserve(1) is None
    partial.release()
    assert traffic.buffered == 0


def _assigned_attributes(path: Path) -> list[tuple[int, str, str]]:
    """(line, owner, attribute) of every assignment to an attribute in *path*."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            for leaf in (target.elts if isinstance(target, ast.Tuple) else [target]):
                if isinstance(leaf, ast.Attribute):
                    found.append((node.lineno, ast.unparse(leaf.value), leaf.attr))
    return found


COUNTERS = {"in_flight", "buffered", "_in_flight", "_buffered", "draining"}
MODEL_STATE = {"min_workers", "max_workers", "failures", "last_error", "start_failed", "removed", "next_worker",
               "idle_since", "requests", "workers", "queue"}


def test_traffic_counters_and_model_state_change_only_through_their_methods() -> None:
    wrong = []
    for path in sorted(SERVER.rglob("*.py")):
        for line, owner, attr in _assigned_attributes(path):
            if attr in COUNTERS and path.name != "admission.py":
                wrong.append(f"{path.name}:{line} {owner}.{attr}")
            if attr in MODEL_STATE and path.name != "model.py" and (owner in ("model", "m")
                                                                        or owner.endswith(".model")):
                wrong.append(f"{path.name}:{line} {owner}.{attr}")
    assert not wrong, wrong


class _Gone:
    """The connection of a client that left (what an exchange reads of it once it is lost)."""

    lean = None
    transport = None
    body_by = None

    def write(self, data: bytes) -> None:
        raise AssertionError("nothing is written to a client that left")

    def answer(self, exchange: object, reply: object) -> None:
        raise AssertionError("nothing is answered to a client that left")


def test_a_body_still_decoding_when_its_client_leaves_holds_its_bytes_until_the_decode_ends() -> None:
    """The lean path's client closes while its body is decoded on a thread (``off_loop``): the request stops being
    made, but a thread cannot be stopped, so its body's bytes stay counted against ``max_buffered_bytes`` until the
    decode ends (else clients that send and leave fill memory past the limit); a decode not started never runs."""
    import asyncio
    import threading

    from mmsctl.server.http.calls import off_loop
    from mmsctl.server.http.lean.exchange import Exchange
    from mmsctl.server.http.lean.routes import V2

    async def scenario() -> tuple[int, int, int, bool, list[str]]:
        traffic = Traffic(max_buffered=100)
        running, finish, ran = threading.Event(), threading.Event(), []

        def decode(name: str) -> str:
            running.set()
            ran.append(name)
            assert finish.wait(60)
            return name

        exchange = Exchange(_Gone(), (V2, "/v2/models/{model}/infer", "m", None), [], True, 60)
        exchange.ticket = traffic.reserve(60)
        exchange.preparing = off_loop(decode, "first")
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, running.wait, 60)
        held_while_running = traffic.buffered
        exchange.release()  # connection_lost
        held_after_leaving = traffic.buffered
        loop.call_soon(finish.set)  # the decode ends
        await asyncio.wait({exchange.preparing}, timeout=60)
        never = off_loop(decode, "never")
        never.cancel()
        await asyncio.wait({never}, timeout=60)
        return held_while_running, held_after_leaving, traffic.buffered, exchange.preparing.cancelled(), ran

    assert asyncio.run(scenario()) == (60, 60, 0, True, ["first"])


def test_quiet_returns_once_the_last_request_in_flight_is_answered() -> None:
    """What the drain waits on before the models drain: no admitted request left unanswered."""
    import asyncio

    async def scenario() -> tuple[bool, bool, bool]:
        traffic = Traffic()
        first, second = traffic.reserve(0), traffic.reserve(5)
        assert first is not None and second is not None
        quiet = asyncio.ensure_future(traffic.quiet())
        first.release()
        await asyncio.sleep(0)
        one_left = quiet.done()
        second.release()
        await asyncio.wait({quiet}, timeout=60)
        await asyncio.wait_for(traffic.quiet(), 60)  # none in flight: at once
        return one_left, quiet.done(), traffic.in_flight == 0

    assert asyncio.run(scenario()) == (False, True, True)
