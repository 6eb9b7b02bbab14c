"""Which CPU kernels MXNet runs a model with: MKL-DNN or MXNet's own, measured once per model and machine.

MXNet 1.9.1 reads ``MXNET_MKLDNN_ENABLED`` once, when its library loads, so the choice
is made before a worker imports mxnet: at spawn, in the parent, into the worker's
environment. Which set is faster depends on the network and the CPU (the same SqueezeNet is faster
with MKL-DNN on one machine and without it on another: docs/kernels.md), so the first
time a model is started on a machine it is timed both ways, each in a child process
(a short forward loop at batch 1, with the worker's thread count), and the faster one
is remembered in ``<cache>/kernels/choices.json``. Every later worker of that model,
whatever its handler, and ``mmsctl predict`` take the remembered choice.

The server never waits for that (:func:`defer_measurement`): a model with no remembered choice
starts its workers with MXNet's default at once, and once it is READY :func:`measure_later` times
it in a background thread whose children run at the lowest priority (nice 19, ``SCHED_IDLE``);
workers started after that (``scale``, a restart, a replaced worker) take the result.
``mmsctl predict`` measures in its own run, once: a repeated run finds the choice remembered.

The key is what decides the speed: the network (the symbol file), the input shape,
the parameter file's size, the thread count, the CPU model and the mxnet version.

Overrides, strongest first: ``MXNET_MKLDNN_ENABLED`` set by the user; the ``mkldnn``
setting (``MMSCTL_MKLDNN`` or ``mkldnn`` in config.toml): ``1``/``on``, ``0``/``off``
or ``auto`` (the default). A model that is not an MXNet checkpoint, or runs on a GPU,
keeps MXNet's default. An unreadable or malformed cache file is ignored (and rewritten).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from mmsctl.atomic import write_atomic
from mmsctl.engine.kernel_trials import BATCHED, BUSY_LOAD

__all__ = [
    "Checkpoint",
    "KernelChoice",
    "choose_kernels",
    "find_checkpoint",
    "defer_measurement",
    "kernel_env",
    "measure",
    "measure_later",
    "started_with",
]

log = logging.getLogger("mmsctl.engine.kernels")

#: The variable MXNet reads at library load.
MXNET_VAR = "MXNET_MKLDNN_ENABLED"
#: The setting (``MMSCTL_MKLDNN`` / config.toml ``mkldnn``).
SETTING = "mkldnn"
#: A model whose one input is larger than this (elements; 1 GiB of float32) is not measured.
_MAX_INPUT_ELEMENTS = 2**28
#: Measurements of one model, at most, while the result is not confident (a busy machine, a thin margin).
_MAX_ATTEMPTS = 3
_ON = ("1", "on", "true", "yes")
_OFF = ("0", "off", "false", "no")

_lock = threading.Lock()
_logged: set[str] = set()
#: How the reason of a model over the memory limit starts; such refusals are kept per (key, limit).
_NOT_MEASURED = "not measured: "
_refused: dict[tuple[str, int], "KernelChoice"] = {}
#: After a measurement that failed (neither set loaded: a checkpoint the children cannot bind), no process
#: measures that model again for this many seconds, doubled with each failure in a row up to
#: :data:`_FAILED_MAX_S` (the cache entry's ``failed``); meanwhile the model runs with MXNet's default.
_FAILED_WAIT_S = 3600.0
_FAILED_MAX_S = 7 * 86400.0
#: Set in the server: a missing choice is measured by :func:`measure_later`, never at spawn.
_deferred = False
#: Per model, what its first worker with no remembered choice was started with (for :func:`measure_later`).
_pending: dict[str, tuple[Path, int, Optional[int], Optional[int], Optional[str]]] = {}
_measuring: set[str] = set()
#: Models measured in the background once already (a failed or refused measurement is not retried).
_tried: set[str] = set()
#: Per model, the MKL-DNN setting of the workers started in this process (True: on, MXNet's default included).
_started: dict[str, set[bool]] = {}
_pending_lock = threading.Lock()
_NOT_YET = "not measured yet"
#: Keys this process measured: an unsure choice is measured again in a later run, never twice in one.
_measured_here: set[str] = set()


@dataclass(frozen=True)
class Checkpoint:
    """The files that decide a model's speed: its network, weights and input shape (NCHW)."""

    symbol: Path
    params: Path
    data_name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class KernelChoice:
    """MKL-DNN on (True), off (False) or MXNet's default (None), and why."""

    mkldnn: Optional[bool]
    reason: str
    #: milliseconds per forward at batch 1 with MKL-DNN on and off, where measured.
    on_ms: Optional[float] = None
    off_ms: Optional[float] = None
    #: the batch size that costs least per image with the chosen set (1 or :data:`BATCHED`).
    batch: int = 1
    #: Whether the measurement can be trusted (a quiet machine, close trials, a clear margin), and what it ran
    #: under: the load average before it, the spread of its trials, its rounds; how many times it was measured.
    confident: bool = True
    load: Optional[float] = None
    spread: Optional[float] = None
    rounds: int = 0
    attempts: int = 1

    @property
    def settled(self) -> bool:
        """Kept as it is: confident, or measured as often as it will be."""
        return self.confident or self.attempts >= _MAX_ATTEMPTS

    @property
    def label(self) -> str:
        return {True: "MKL-DNN", False: "MXNet's own kernels (MKL-DNN off)", None: "MXNet's default"}[self.mkldnn]

    def env(self) -> dict[str, str]:
        """What goes into the worker's environment (nothing where MXNet's default stays)."""
        if self.mkldnn is None:
            return {}
        out = {MXNET_VAR: "1" if self.mkldnn else "0"}
        if not self.mkldnn:  # else every bind logs a storage-fallback warning
            out["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] = "0"
        return out


def find_checkpoint(root: Path) -> Optional[Checkpoint]:
    """The one MXNet checkpoint of a model folder with its input shape (signature.json), or None."""
    try:
        symbols = sorted(root.glob("*-symbol.json"))
        if len(symbols) != 1:
            return None
        prefix = symbols[0].name[: -len("-symbol.json")]
        params = sorted(p for p in root.glob(f"{prefix}-*.params") if p.stem[len(prefix) + 1:].isdigit())
        with open(root / "signature.json", encoding="utf-8") as fh:
            first = json.load(fh)["inputs"][0]
        shape = tuple(max(1, int(v)) for v in first["data_shape"])
        name = str(first["data_name"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    if not params or len(shape) < 2 or math.prod(shape[1:]) > _MAX_INPUT_ELEMENTS:
        return None  # an archive's signature could ask the measuring children for any amount of memory
    return Checkpoint(symbols[0], params[-1], name, (1,) + shape[1:])


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def _mxnet_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("mxnet", "mxnet-mkl", "mxnet-native"):
        try:
            return f"{dist} {version(dist)}"
        except PackageNotFoundError:
            continue
    return "mxnet ?"


#: What the built-in handler's source calls when it rewrites the network (a copy packed into an archive
#: before 27 Nov 2026 does not, and runs the network as saved).
_REWRITING_HANDLER = b"_graph.normalise("


def rewrites_graph(ckpt: Checkpoint, handler: Optional[str] = None) -> bool:
    """Whether the workers run *ckpt*'s network rewritten by :mod:`mmsctl.engine.graph`: the built-in
    handler (*handler* None or ``mmsctl_vision_service``) does, where a rewrite applies and is not off,
    unless the model's folder holds its own copy of that handler from before the rewrites."""
    from mmsctl.engine.builtin import VISION_HANDLER_MODULE
    from mmsctl.engine.graph import enabled, normalise
    from mmsctl.engine.loader import split_handler

    if not enabled() or (handler is not None and split_handler(handler)[0] != VISION_HANDLER_MODULE):
        return False
    try:
        packed = ckpt.symbol.parent / f"{VISION_HANDLER_MODULE}.py"  # archive create copies it beside the files
        if packed.is_file() and _REWRITING_HANDLER not in packed.read_bytes():
            return False
        return bool(normalise(ckpt.symbol.read_text(encoding="utf-8"))[1])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return False


def cache_key(ckpt: Checkpoint, threads: int, rewritten: bool = False) -> str:
    """What decides the speed, hashed: network (and whether it is rewritten), input shape, weight size,
    threads, CPU, mxnet."""
    from mmsctl.engine.graph import VERSION

    h = hashlib.blake2b(digest_size=16)
    h.update(ckpt.symbol.read_bytes())
    facts = [ckpt.data_name, list(ckpt.shape), ckpt.params.stat().st_size, threads, _cpu_model(), _mxnet_version()]
    if rewritten:  # a machine that remembers the unrewritten graph's choice measures again
        facts.append(f"graph-{VERSION}")
    h.update(json.dumps(facts).encode("utf-8"))
    return h.hexdigest()


def _cache_file() -> Path:
    from mmsctl.config import cache_dir

    return cache_dir() / "kernels" / "choices.json"


def _read_cache(path: Path) -> dict[str, Any]:
    """The remembered choices; anything unreadable counts as none."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remembered(entry: Any) -> Optional[KernelChoice]:
    if not isinstance(entry, dict) or not isinstance(entry.get("mkldnn"), bool):
        return None
    on, off = entry.get("on_ms"), entry.get("off_ms")
    if not all(isinstance(v, (int, float)) or v is None for v in (on, off)):
        return None
    when = str(entry.get("measured", "earlier"))[:32]
    batch = entry.get("batch", 1)
    batch = batch if type(batch) is int and 1 <= batch <= BATCHED else 1
    confident = entry.get("confident") is True  # an entry without the mark is measured again
    attempts = entry.get("attempts", 1)
    attempts = attempts if type(attempts) is int and attempts >= 1 else 1
    load, spread = (v if isinstance(v, (int, float)) else None for v in (entry.get("load"), entry.get("spread")))
    rounds = entry["rounds"] if type(entry.get("rounds")) is int else 0
    return KernelChoice(entry["mkldnn"], f"measured on {when}: {_both(on, off)}", on, off, batch, confident, load,
                        spread, rounds, attempts)


def _load() -> float:
    """The 1-minute load average now (0 where the system has none)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0


def _measure_again(found: KernelChoice, key: str) -> bool:
    """Whether a remembered choice that is not settled is measured again now: not twice in one process, and,
    where a busy machine made it unsure, only once the machine is clearly quieter than it was then."""
    if found.settled or key in _measured_here:
        return False
    if found.load is None or found.load / (os.cpu_count() or 1) <= BUSY_LOAD:
        return True  # unsure for its trials or its margin, on a quiet machine: measure again
    return _load() <= 0.75 * found.load


def _kept(old: Optional[KernelChoice], new: KernelChoice) -> KernelChoice:
    """What is remembered after measuring *new* where *old* was not settled: a confident result, else the one
    measured under the lower load; its attempts counted."""
    if old is None:
        return new
    attempts = old.attempts + 1
    if new.mkldnn is None:  # this attempt failed: the earlier result stays
        return replace(old, attempts=attempts)
    better = new.confident or old.load is None or new.load is None or new.load <= old.load
    return replace(new if better else old, attempts=attempts)


def _both(on: Optional[float], off: Optional[float]) -> str:
    text = lambda v: f"{v:.1f} ms" if v is not None else "failed"  # noqa: E731
    return f"{text(on)} per forward with MKL-DNN, {text(off)} without"


def _write_cache(path: Path, key: str, choice: KernelChoice, model: str) -> None:
    """Add one entry, atomically (the caller holds the lock file); errors only cost a re-measure."""
    entry = asdict(choice)
    entry.pop("reason")
    entry.update(model=model, measured=time.strftime("%Y-%m-%d %H:%M"))
    _write_entry(path, key, entry)


def _write_entry(path: Path, key: str, entry: dict[str, Any]) -> None:
    """The cache with *key*'s entry replaced by *entry*, written atomically; errors only cost a re-measure."""
    data = _read_cache(path)
    data[key] = entry
    with contextlib.suppress(OSError):
        write_atomic(path, json.dumps(data, indent=1, sort_keys=True), private=True)


def _failures(entry: Any) -> tuple[int, float]:
    """How many measurements in a row failed for a cache *entry*, and when the last did (0, 0.0: none)."""
    failed = entry.get("failed") if isinstance(entry, dict) else None
    if not isinstance(failed, dict):
        return 0, 0.0
    count, at = failed.get("count"), failed.get("at")
    if type(count) is not int or count < 1 or not isinstance(at, (int, float)) or isinstance(at, bool):
        return 0, 0.0
    try:
        return count, float(at)
    except OverflowError:  # an int past any float: no time this machine wrote
        return 0, 0.0


def _failed(entry: Any) -> Optional[KernelChoice]:
    """MXNet's default while a remembered failed measurement's back-off lasts (None: measure, or nothing failed).
    A clock that went back past the failure ends the back-off."""
    count, at = _failures(entry)
    if not count:
        return None
    wait = min(_FAILED_WAIT_S * 2 ** min(count - 1, 20), _FAILED_MAX_S)
    now = time.time()
    if not at <= now < at + wait:
        return None
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at + wait))
    return KernelChoice(None, f"{_NOT_MEASURED}the measurement failed {count} time{'s' * (count > 1)} in a row "
                              f"(last: {str(entry['failed'].get('reason', '?'))[:120]}); measured again after {when}")


def _write_failure(path: Path, key: str, entry: Any, choice: KernelChoice, model: str, limit: int) -> None:
    """Remember that measuring *key* failed (why, under which memory limit, how many times in a row), so no
    process measures it again before :func:`_failed`'s back-off ends (the caller holds the lock file)."""
    count = _failures(entry)[0] + 1
    _write_entry(path, key, {"model": model, "failed": {"count": count, "at": time.time(),
                                                         "reason": choice.reason[:200], "max_memory": limit}})


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """One measurement per model at a time, across processes (two workers starting at once)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(path.with_suffix(".lock"), "a")
    except OSError:
        yield
        return
    try:
        import fcntl

        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fh.close()


def measure(ckpt: Checkpoint, threads: int = 1, max_memory: Optional[int] = None,
            low_priority: bool = False, rewrite: Optional[bool] = None) -> KernelChoice:
    """Time the forward pass both ways, interleaved (:mod:`mmsctl.engine.kernel_trials`), and pick the faster.

    The children run under the memory limit of a worker with *max_memory* as its network limit
    (default: :func:`mmsctl.engine.memory.limit_from_env`); a network over it is not measured.
    With *low_priority* the children run at nice 19 / ``SCHED_IDLE`` (the server's background measurement).
    *rewrite*: time the network as :mod:`mmsctl.engine.graph` rewrites it (default: as the built-in handler runs it).
    """
    from mmsctl.engine import kernel_trials as kt
    from mmsctl.engine.memory import limit_from_env

    limit = max_memory if max_memory is not None else limit_from_env()
    rewrite = rewrites_graph(ckpt) if rewrite is None else rewrite
    model = [str(ckpt.symbol), str(ckpt.params), ckpt.data_name, list(ckpt.shape), limit]
    variants = [kt.Variant(True, rewrite), kt.Variant(False, rewrite)]

    def sure(trials: kt.Trials) -> bool:
        decision = kt.decide(trials, *variants)
        return decision is not None and decision.confident

    try:
        trials = _trials(model, variants, threads, low_priority, sure)
    except kt.Refused as exc:
        return KernelChoice(None, f"{_NOT_MEASURED}{exc}")
    decision = kt.decide(trials, *variants) if trials is not None else None
    if decision is None:
        return KernelChoice(None, "could not measure (neither set loaded)")
    return KernelChoice(decision.mkldnn, f"measured now: {_both(decision.on_ms, decision.off_ms)}{_doubt(decision)}",
                        decision.on_ms, decision.off_ms, decision.batch, decision.confident, decision.load,
                        round(decision.spread, 3), decision.rounds)


def _trials(model: list[Any], variants: list[Any], threads: int, low_priority: bool,
            sure: Callable[[Any], bool]) -> Any:
    """The interleaved trials (the seam the tests stand in for with recorded ones)."""
    from mmsctl.engine.kernel_trials import run_trials

    return run_trials(model, variants, threads=threads, low_priority=low_priority, sure=sure)


def _doubt(decision: Any) -> str:
    return f" (to be measured again: {decision.doubt})" if not decision.confident else ""


def _setting() -> tuple[str, str]:
    """The ``mkldnn`` setting (normalised) and where it came from."""
    from mmsctl.config import setting
    from mmsctl.errors import ConfigError

    try:
        value = (setting(SETTING) or "auto").strip().lower()
    except ConfigError:
        value = "auto"
    source = "MMSCTL_MKLDNN" if os.environ.get("MMSCTL_MKLDNN") else "the mkldnn setting"
    return value, source


def choose_kernels(root: Path, *, threads: int = 1, gpu: Optional[int] = None,
                   measure_missing: bool = True, max_memory: Optional[int] = None,
                   low_priority: bool = False, handler: Optional[str] = None) -> KernelChoice:
    """The kernel set for the model in *root* run with *threads* OpenMP threads by *handler* (None: the built-in
    one, which runs the network as :mod:`mmsctl.engine.graph` rewrites it; others run it as it is).

    Measures and remembers on first use (seconds, once per model and machine) unless
    *measure_missing* is False. A network over *max_memory* bytes (the worker's limit; default the
    ``max_model_memory`` setting) is not measured, and this process does not ask again.
    """
    user = os.environ.get(MXNET_VAR)
    if user is not None:
        return KernelChoice(user != "0", f"{MXNET_VAR}={user} is set in the environment")
    value, source = _setting()
    if value in _ON:
        return KernelChoice(True, f"{source} is {value}")
    if value in _OFF:
        return KernelChoice(False, f"{source} is {value}")
    if value != "auto":
        log.warning("%s is %r, not 0, 1 or auto: measuring as for auto", source, value)
    if gpu is not None:
        return KernelChoice(None, "runs on a GPU")
    ckpt = find_checkpoint(Path(root))
    if ckpt is None:
        return KernelChoice(None, "not an MXNet checkpoint with a signature.json")
    try:
        rewrite = rewrites_graph(ckpt, handler)
        key = cache_key(ckpt, threads, rewrite)
    except OSError:
        return KernelChoice(None, "cannot read the checkpoint")
    path = _cache_file()
    entry = _read_cache(path).get(key)
    found = _remembered(entry)
    if not measure_missing or found is not None and not _measure_again(found, key):
        return found or _failed(entry) or KernelChoice(None, _NOT_YET)
    from mmsctl.engine.memory import limit_from_env

    limit = max_memory if max_memory is not None else limit_from_env()
    with _lock, _file_lock(path):
        entry = _read_cache(path).get(key)
        found = _remembered(entry)  # measured meanwhile
        refused = _refused.get((key, limit)) or (_failed(entry) if found is None else None)
        if found is not None and not _measure_again(found, key) or found is None and refused is not None:
            return found or refused  # type: ignore[return-value]
        _measured_here.add(key)
        choice = measure(ckpt, threads, limit, low_priority, rewrite)
        if choice.reason.startswith(_NOT_MEASURED):
            _refused[(key, limit)] = choice
        kept = _kept(found, choice)
        model = ckpt.symbol.name[: -len("-symbol.json")]
        if kept.mkldnn is not None:
            _write_cache(path, key, kept, model)
        elif found is None and not choice.reason.startswith(_NOT_MEASURED):
            _write_failure(path, key, entry, choice, model, limit)
        return kept


def kernel_env(root: Path, *, threads: int = 1, gpu: Optional[int] = None, model: str = "",
               max_memory: Optional[int] = None, handler: Optional[str] = None) -> dict[str, str]:
    """The environment entries for a worker of the model in *root* (whose network may take *max_memory*
    bytes) run by *handler* (None: the built-in one); logs the choice once per model."""
    choice = choose_kernels(root, threads=threads, gpu=gpu, max_memory=max_memory, measure_missing=not _deferred,
                            handler=handler)
    name = model or Path(root).name
    if _deferred and (choice.reason == _NOT_YET or not choice.settled):  # measured (again) once READY
        with _pending_lock:
            if name not in _measuring and name not in _tried:
                _pending.setdefault(name, (Path(root), threads, gpu, max_memory, handler))
    with _pending_lock:
        _started.setdefault(name, set()).add(choice.mkldnn is not False)
    tag = f"{name}:{threads}"
    if tag not in _logged:
        _logged.add(tag)
        log.info("model %s runs with %s: %s", model or Path(root).name, choice.label, choice.reason)
    return choice.env()


def apply_in_process(root: Path, *, gpu: Optional[int] = None, model: str = "",
                     handler: Optional[str] = None) -> Optional[KernelChoice]:
    """Set the kernel choice in this process's environment, for a model loaded here (``mmsctl predict``
    on a few inputs). Only before mxnet is imported: after, the library has read it already."""
    if "mxnet" in sys.modules:
        return None
    omp = os.environ.get("OMP_NUM_THREADS", "")
    threads = int(omp) if omp.isdigit() and int(omp) > 0 else (os.cpu_count() or 1)
    choice = choose_kernels(root, threads=threads, gpu=gpu, handler=handler)
    log.info("model %s runs with %s: %s", model or Path(root).name, choice.label, choice.reason)
    os.environ.update(choice.env())
    return choice


def defer_measurement(deferred: bool = True) -> None:
    """From now on (in this process: the server) a worker with no remembered choice starts with MXNet's
    default at once; :func:`measure_later` measures its model once it is READY."""
    global _deferred
    _deferred = deferred


def measure_later(model: str, done: Optional[Callable[[Optional[KernelChoice]], None]] = None) -> Optional[str]:
    """Measure *model* in a background thread (children at the lowest priority) if a worker of it started
    without a remembered choice; the line saying so (also logged), or None when there is nothing to do.
    *done* is called in that thread with the choice (None if measuring failed)."""
    with _pending_lock:
        args = _pending.pop(model, None)
        if args is None or model in _measuring:
            return None
        _measuring.add(model)
    line = (f"{model}: measuring MKL-DNN vs MXNet kernels in the background; "
            "workers started from now on use the faster")
    log.info("%s", line)
    threading.Thread(target=_measure_now, args=(model, *args, done), name=f"kernels-{model}", daemon=True).start()
    return line


def _measure_now(model: str, root: Path, threads: int, gpu: Optional[int], max_memory: Optional[int],
                 handler: Optional[str], done: Optional[Callable[[Optional[KernelChoice]], None]]) -> None:
    choice: Optional[KernelChoice] = None
    try:
        choice = choose_kernels(root, threads=threads, gpu=gpu, max_memory=max_memory, low_priority=True,
                                handler=handler)
        log.info("model %s measured: %s for workers started from now on (%s)", model, choice.label, choice.reason)
    except Exception:  # noqa: BLE001 - a failed measurement only keeps MXNet's default
        log.exception("model %s: measuring its kernels failed; its workers keep MXNet's default", model)
    finally:
        with _pending_lock:
            _measuring.discard(model)
            _tried.add(model)
            _logged.difference_update({t for t in _logged if t.startswith(f"{model}:")})
        if done is not None:
            done(choice)


def started_with(model: str) -> list[bool]:
    """The MKL-DNN settings (True: on, as by MXNet's default) the workers of *model* started in this process got."""
    with _pending_lock:
        return sorted(_started.get(model, ()))


def reset_started(model: str, mkldnn: bool) -> None:
    """Every worker of *model* now runs with MKL-DNN *mkldnn* (the others were replaced)."""
    with _pending_lock:
        _started[model] = {mkldnn}


def forget_started(model: str) -> None:
    """*model* has no workers any more (unregistered): what they ran with no longer counts."""
    with _pending_lock:
        _started.pop(model, None)
