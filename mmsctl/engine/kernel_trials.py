"""Timing a checkpoint's forward pass per kernel set, robust to a busy machine, and deciding from the times.

MXNet reads ``MXNET_MKLDNN_ENABLED`` when its library loads, so each kernel set needs a process of its own.
Both children load and bind the model, then take turns: a round asks each for a few forward passes (batch 1,
and batch :data:`BATCHED` where it fits the memory limit), in the order A B, then B A, so that whatever else
loads the machine falls on both sets alike. Each forward is timed in CPU time, and each set is judged by
its fastest forward: interference only ever adds time, so the minimum is the estimate it disturbs least
(a mean of the trials measured while other work ran picks the wrong set).

:func:`decide` is the whole decision, from the recorded trials: MKL-DNN (MXNet's default) stays unless
switching it off is more than :data:`MARGIN` faster. It also says whether the result can be trusted
(:attr:`Decision.confident`): not when the machine was busy (load average per core over
:data:`BUSY_LOAD`), the trials of a set spread widely (the median more than :data:`WIDE_SPREAD` over the
minimum) or the two sets are within :data:`THIN` of the margin. :func:`run_trials` adds rounds while that
is so and time is left; a result still not confident is measured again later (:mod:`mmsctl.engine.kernels`).
"""

from __future__ import annotations

import json
import os
import select
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

__all__ = ["BATCHED", "MARGIN", "Decision", "Refused", "Trials", "Variant", "decide", "run_trials"]

#: The larger batch timed beside batch 1 (``predict`` batches only where that is faster per image).
BATCHED = 4
#: MKL-DNN is switched off only when that is more than 10 % faster (noise never flips MXNet's default).
MARGIN = 1.1
#: A ratio within this fraction of :data:`MARGIN` is too close to call on one measurement.
THIN = 0.05
#: Load average per core above which the machine counts as busy.
BUSY_LOAD = 0.5
#: A set whose median trial is more than this over its fastest was disturbed.
WIDE_SPREAD = 0.25
#: Rounds at least, at most, and the seconds of rounds before more are added only for an unsure result.
MIN_ROUNDS, MAX_ROUNDS = 3, 24
BUDGET_S, EXTRA_BUDGET_S = 2.0, 4.0
#: Forwards per set and round at batch 1 (one at batch :data:`BATCHED`).
FORWARDS = 2
#: A child that takes longer than this to load, or to answer a round, is given up.
CHILD_TIMEOUT_S = 120.0
#: The environment variable that makes a measuring child lower its own priority.
IDLE_VAR = "MMSCTL_MEASURE_IDLE"
MXNET_VAR = "MXNET_MKLDNN_ENABLED"

_CHILD = """
import json, os, sys, time
if os.environ.get("MMSCTL_MEASURE_IDLE") == "1":  # in the background: never take CPU a worker wants
    try:
        os.nice(19)
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        pass
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL: the parent gone, this child goes too
    except (AttributeError, OSError):
        pass
from mmsctl.engine.memory import check_network, limit_this_process
from mmsctl.errors import EngineError
symbol, params, name, shape, limit, rewrite, batched = json.loads(sys.argv[1])
limit_this_process(limit)  # before mxnet loads: this child is bounded as a worker is
try:
    check_network(symbol, name, tuple(shape), limit)
except EngineError as exc:
    print(json.dumps({"refused": exc.message}), flush=True)
    sys.exit(3)
try:
    check_network(symbol, name, (batched,) + tuple(shape[1:]), limit)
except EngineError:
    batched = 0  # batch 1 only
from mmsctl.engine.mxnet_compat import import_mxnet
mx = import_mxnet()
sym = mx.sym.load(symbol)
if rewrite:  # the graph the built-in handler's workers run
    from mmsctl.engine.graph import normalise
    sym = mx.sym.load_json(normalise(sym.tojson())[0])
loaded = mx.nd.load(params)
args = {k[4:]: v for k, v in loaded.items() if k.startswith("arg:")}
aux = {k[4:]: v for k, v in loaded.items() if k.startswith("aux:")}
modules, inputs = {}, {}
for n in (1, batched) if batched else (1,):  # a module per batch size, sharing the weights: no reshape per trial
    m = mx.mod.Module(sym, data_names=[name], label_names=None, context=mx.cpu())
    m.bind(for_training=False, data_shapes=[(name, (n,) + tuple(shape[1:]))], shared_module=modules.get(1))
    if n == 1:
        m.set_params(args, aux, allow_missing=True, allow_extra=True)
    modules[n], inputs[n] = m, mx.io.DataBatch([mx.nd.random.uniform(0, 255, (n,) + tuple(shape[1:]))])
    for _ in range(3):  # warm-up: MKL-DNN's primitives are made on the first passes
        m.forward(inputs[n], is_train=False)
        m.get_outputs()[0].asnumpy()
print(json.dumps({"ready": True, "batched": batched}), flush=True)
for line in sys.stdin:  # "FORWARDS BATCH": that many passes, each in ms of CPU time per image
    count, n = (int(v) for v in line.split())
    times = []
    for _ in range(count):
        t0 = time.process_time()  # CPU time: what other processes do to the wall clock stays out
        modules[n].forward(inputs[n], is_train=False)
        modules[n].get_outputs()[0].asnumpy()
        times.append(1000 * (time.process_time() - t0) / n)
    print(json.dumps(times), flush=True)
"""


class Refused(Exception):
    """The model's network at batch 1 is over the memory limit (the message says so)."""


@dataclass(frozen=True)
class Variant:
    """One way to run the checkpoint: a kernel set, and the graph as saved or as rewritten."""

    mkldnn: bool
    rewrite: bool = False


@dataclass
class Trials:
    """What one measurement recorded: per variant, its forwards (ms of CPU time per image) at batch 1 and at
    batch :data:`BATCHED`, in the order they ran, and the conditions it ran under."""

    one: dict[Variant, list[float]] = field(default_factory=dict)
    batched: dict[Variant, list[float]] = field(default_factory=dict)
    rounds: int = 0
    #: The 1-minute load average before the children started, and the CPUs it is shared by.
    load: float = 0.0
    cpus: int = 1


@dataclass(frozen=True)
class Decision:
    """A kernel set chosen from trials, and how far it can be trusted."""

    mkldnn: bool
    on_ms: Optional[float]
    off_ms: Optional[float]
    batch: int
    confident: bool
    #: Why it is not confident ("" when it is): a busy machine, spread trials, a thin margin.
    doubt: str
    load: float
    spread: float
    rounds: int


def _spread(times: Sequence[float]) -> float:
    return statistics.median(times) / min(times) - 1 if times and min(times) > 0 else 0.0


def decide(trials: Trials, on: Variant = Variant(True), off: Variant = Variant(False)) -> Optional[Decision]:
    """The kernel set for *trials* (None when neither set has a trial): the faster by its fastest forward,
    MKL-DNN unless off is more than :data:`MARGIN` faster; not confident where the conditions were poor."""
    on_t, off_t = trials.one.get(on) or [], trials.one.get(off) or []
    if not on_t and not off_t:
        return None
    on_ms, off_ms = (min(on_t) if on_t else None), (min(off_t) if off_t else None)
    ratio = on_ms / off_ms if on_ms is not None and off_ms else None
    mkldnn = ratio is None and on_ms is not None or ratio is not None and ratio <= MARGIN
    chosen = on if mkldnn else off
    best = min(trials.one[chosen])
    four = trials.batched.get(chosen) or []
    batch = BATCHED if four and min(four) < 0.95 * best else 1
    spread = max(_spread(on_t), _spread(off_t))
    doubts = []
    if trials.load / max(1, trials.cpus) > BUSY_LOAD:
        doubts.append(f"load average {trials.load:.2f} on {trials.cpus} CPUs")
    if spread > WIDE_SPREAD:
        doubts.append(f"trials spread {spread:.0%}")
    if ratio is not None and abs(ratio / MARGIN - 1) < THIN:
        doubts.append(f"MKL-DNN/off {ratio:.2f}, at the {MARGIN:.2f} margin")
    if ratio is None:
        doubts.append("one set failed")
    return Decision(mkldnn, on_ms, off_ms, batch, not doubts, "; ".join(doubts), trials.load, spread, trials.rounds)


class _Child:
    """One measuring process: the checkpoint bound in one variant, timing forwards on request."""

    def __init__(self, variant: Variant, model: Sequence[object], env: dict[str, str]) -> None:
        child_env = {k: v for k, v in env.items() if k != MXNET_VAR}
        child_env[MXNET_VAR] = "1" if variant.mkldnn else "0"
        if not variant.mkldnn:  # else every bind logs a storage-fallback warning
            child_env["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"
        self.variant = variant
        self.batched = 0
        payload = json.dumps([*model, variant.rewrite, BATCHED])
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD, payload], env=child_env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def _line(self, timeout: float) -> object:
        assert self.proc.stdout is not None
        if not select.select([self.proc.stdout], [], [], timeout)[0]:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise EOFError
        return json.loads(line)

    def ready(self, timeout: float) -> bool:
        """Wait for the model to be bound; False if the child failed. Raises Refused (over the memory limit)."""
        try:
            message = self._line(timeout)
        except (TimeoutError, EOFError, ValueError):
            return False
        if isinstance(message, dict) and "refused" in message:
            raise Refused(str(message["refused"]))
        if not isinstance(message, dict) or message.get("ready") is not True:
            return False
        self.batched = int(message.get("batched") or 0)
        return True

    def trial(self, count: int, batch: int) -> Optional[list[float]]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(f"{count} {batch}\n")
            self.proc.stdin.flush()
            times = self._line(CHILD_TIMEOUT_S)
        except (OSError, TimeoutError, EOFError, ValueError):
            return None
        return [float(t) for t in times] if isinstance(times, list) else None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


def _env(threads: int, low_priority: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(max(1, threads))
    env["MXNET_SUBGRAPH_VERBOSE"] = "0"
    env.pop(IDLE_VAR, None)
    if low_priority:
        env[IDLE_VAR] = "1"
    return env


def _round(children: list[_Child], trials: Trials) -> bool:
    """One round: each child's forwards, in turn, the order reversed every other round. False: a child failed."""
    order = children if trials.rounds % 2 == 0 else children[::-1]
    for child in order:
        one = child.trial(FORWARDS, 1)
        four = child.trial(1, child.batched) if child.batched else []
        if one is None or four is None:
            return False
        trials.one.setdefault(child.variant, []).extend(one)
        trials.batched.setdefault(child.variant, []).extend(four)
    trials.rounds += 1
    return True


def run_trials(model: Sequence[object], variants: Sequence[Variant], *, threads: int, low_priority: bool,
               sure: Optional[Callable[[Trials], bool]] = None) -> Optional[Trials]:
    """*model* (symbol file, params file, input name, input shape, memory limit) timed in each of *variants*:
    interleaved rounds of every variant until :data:`BUDGET_S` is spent (at least :data:`MIN_ROUNDS`); then,
    while *sure* (a function of the trials) says no, more rounds up to :data:`EXTRA_BUDGET_S`. None when a
    child failed to load. Raises Refused when the network is over the memory limit."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    trials = Trials(load=load, cpus=os.cpu_count() or 1)
    env = _env(threads, low_priority)
    children = [_Child(v, model, env) for v in variants]
    try:
        deadline = time.monotonic() + CHILD_TIMEOUT_S
        ready = [c for c in children if c.ready(max(0.1, deadline - time.monotonic()))]
        if not ready:
            return None
        started = time.monotonic()
        while trials.rounds < MAX_ROUNDS:  # bounded: MAX_ROUNDS, and each trial has its timeout
            spent = time.monotonic() - started
            if trials.rounds >= MIN_ROUNDS and (spent > EXTRA_BUDGET_S or spent > BUDGET_S and
                                                (sure is None or sure(trials))):
                break
            if not _round(ready, trials):
                return trials if trials.rounds >= MIN_ROUNDS else None
        return trials
    finally:
        for child in children:
            child.close()
