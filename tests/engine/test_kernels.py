"""The kernel set (MKL-DNN on or off) is measured once per model, remembered, and honoured by workers."""

from __future__ import annotations

import json
import statistics
import threading
from pathlib import Path
from typing import Any, Callable

import pytest

from mmsctl.engine import kernels
from mmsctl.engine import kernel_trials
from mmsctl.engine.kernel_trials import MARGIN, Decision, Trials, Variant, decide
from mmsctl.engine.kernels import KernelChoice, choose_kernels, find_checkpoint
from mmsctl.engine.spec import ServiceSpec
from mmsctl.engine.worker import READY, RESULT, WorkerProcess, worker_env
from mmsctl.engine.protocol import RequestItem
from tests.engine.helpers import build_tiny_checkpoint, handler_archive

ENV_ECHO = '''
import json, os

def handle(data, context):
    if data is None:
        return None
    return [json.dumps({k: os.environ.get(k) for k in ("MXNET_MKLDNN_ENABLED",
                                                      "MXNET_STORAGE_FALLBACK_LOG_VERBOSE")})
            for _ in data]
'''


@pytest.fixture(scope="module")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny MXNet checkpoint with a custom (non-vision) handler that reports its environment."""
    root = tmp_path_factory.mktemp("tiny")
    build_tiny_checkpoint(root)
    handler_archive(root, {"env_echo.py": ENV_ECHO}, handler="env_echo:handle", model_name="tiny")
    return root


def _spec(root: Path) -> ServiceSpec:
    return ServiceSpec(root, "tiny", "env_echo:handle")


def _worker_reports(spec: ServiceSpec) -> dict[str, str]:
    worker = WorkerProcess(spec)
    try:
        assert worker.receive() == (READY, None)
        worker.send_batch([RequestItem.from_body("r", b"x")])
        kind, result = worker.receive()
        assert kind == RESULT
        return json.loads(result.responses[0].body)
    finally:
        worker.stop()


@pytest.fixture
def auto(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel set measured (``auto``), nothing of the user's own forcing it."""
    monkeypatch.setenv("MMSCTL_MKLDNN", "auto")
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)


def _cache_file() -> Path:
    return kernels._cache_file()


@pytest.mark.usefixtures("auto")
def test_auto_measures_a_model_once_and_its_workers_run_with_the_faster_set(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reported = _worker_reports(_spec(tiny_root))
    entries = json.loads(_cache_file().read_text())
    assert len(entries) == 1
    (entry,) = entries.values()
    assert entry["on_ms"] > 0 and entry["off_ms"] > 0
    assert entry["mkldnn"] == (entry["on_ms"] <= MARGIN * entry["off_ms"])  # default unless clearly slower
    assert entry["rounds"] >= 3 and entry["load"] >= 0 and entry["attempts"] == 1 and "confident" in entry
    assert reported["MXNET_MKLDNN_ENABLED"] == ("1" if entry["mkldnn"] else "0")
    assert reported["MXNET_STORAGE_FALLBACK_LOG_VERBOSE"] == (None if entry["mkldnn"] else "0")

    # Remembered: no second measurement, for the next worker or anyone else on this machine.
    def no_measuring(*args: object) -> None:
        raise AssertionError("measured twice")

    monkeypatch.setattr(kernels, "_trials", no_measuring)
    assert _worker_reports(_spec(tiny_root)) == reported
    monkeypatch.setattr(kernels, "_MAX_ATTEMPTS", 1)  # settled, confident or not: this test is not about that
    again = choose_kernels(tiny_root)
    assert again.mkldnn is entry["mkldnn"] and again.reason.startswith("measured on ")


def test_the_setting_overrides_the_measurement(tiny_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MXNET_MKLDNN_ENABLED", raising=False)
    monkeypatch.setattr(kernels, "_trials", lambda *a: pytest.fail("an override must not measure"))
    monkeypatch.setenv("MMSCTL_MKLDNN", "0")
    assert _worker_reports(_spec(tiny_root)) == {"MXNET_MKLDNN_ENABLED": "0", "MXNET_STORAGE_FALLBACK_LOG_VERBOSE": "0"}
    monkeypatch.setenv("MMSCTL_MKLDNN", "on")
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "1"
    # config.toml's mkldnn setting, where the environment says nothing
    monkeypatch.delenv("MMSCTL_MKLDNN")
    config = Path(kernels.os.environ["MMSCTL_CONFIG_DIR"])
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.toml").write_text('mkldnn = "off"\n')
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "0"
    # the user's own MXNET_MKLDNN_ENABLED wins over everything
    monkeypatch.setenv("MXNET_MKLDNN_ENABLED", "1")
    assert worker_env(1, spec=_spec(tiny_root))["MXNET_MKLDNN_ENABLED"] == "1"


def _recorded(on: list[float], off: list[float], *, load: float = 0.1, on4: tuple[float, ...] = (),
              off4: tuple[float, ...] = ()) -> Callable[..., Trials]:
    """A stand-in for the interleaved trials that answers with recorded ones (ms per image, as the children time)."""
    def trials(model: object, variants: list[Variant], *args: object) -> Trials:
        calls.append(len(variants))
        v_on, v_off = variants
        return Trials({v_on: list(on), v_off: list(off)}, {v_on: list(on4), v_off: list(off4)}, rounds=3, load=load,
                      cpus=2)

    calls: list[int] = []
    trials.calls = calls  # type: ignore[attr-defined]
    return trials


@pytest.mark.usefixtures("auto")
@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"KEY": {"mkldnn": "yes", "on_ms": "fast"}}'])
def test_a_broken_cache_file_is_ignored_and_rewritten(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    key = kernels.cache_key(find_checkpoint(tiny_root), 1)
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content.replace("KEY", key))
    recorded = _recorded([5.0, 5.2, 5.1], [3.0, 3.1, 3.0], off4=(2.0,))
    monkeypatch.setattr(kernels, "_trials", recorded)
    choice = choose_kernels(tiny_root)
    assert (choice.mkldnn, choice.on_ms, choice.off_ms, choice.batch, choice.confident) == (False, 5.0, 3.0, 4, True)
    assert json.loads(path.read_text())[key]["mkldnn"] is False
    again = choose_kernels(tiny_root)
    assert (again.mkldnn, again.on_ms, again.off_ms, again.batch) == (False, 5.0, 3.0, 4)
    assert recorded.calls == [2]  # type: ignore[attr-defined]


@pytest.mark.usefixtures("auto")
def test_a_failed_measurement_keeps_the_default_and_is_not_tried_again_until_its_back_off_ends(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``mmsctl predict`` runs in a new process each time: a failure is remembered in the cache file (with a
    count), so the next runs start no measuring children until the back-off, doubled per failure, ends."""
    tries: list[int] = []
    monkeypatch.setattr(kernels, "_trials", lambda *a: tries.append(1))  # neither set loaded: None
    now = [1_000_000.0]
    monkeypatch.setattr(kernels.time, "time", lambda: now[0])

    def next_run() -> kernels.KernelChoice:
        monkeypatch.setattr(kernels, "_measured_here", set())  # a new process
        return choose_kernels(tiny_root)

    choice = next_run()
    assert choice.mkldnn is None and choice.env() == {} and len(tries) == 1
    entry = next(iter(json.loads(_cache_file().read_text()).values()))
    assert entry["failed"]["count"] == 1 and "could not measure" in entry["failed"]["reason"]
    later = next_run()
    assert len(tries) == 1 and later.mkldnn is None and later.env() == {} and "failed 1 time" in later.reason
    now[0] += kernels._FAILED_WAIT_S
    assert next_run().mkldnn is None and len(tries) == 2  # back-off over: measured again, failed again
    now[0] += kernels._FAILED_WAIT_S  # half of the doubled back-off
    assert "failed 2 times" in next_run().reason and len(tries) == 2
    now[0] += kernels._FAILED_WAIT_S
    monkeypatch.setattr(kernels, "_trials", _recorded([5.0, 5.0], [3.0, 3.0]))
    assert next_run().mkldnn is False  # measured: the failure is forgotten
    assert "failed" not in next(iter(json.loads(_cache_file().read_text()).values()))


@pytest.mark.usefixtures("auto")
@pytest.mark.parametrize("failed", [{"count": 1, "at": 10 ** 400}, {"count": 10 ** 400, "at": 1.0},
                                    {"count": 1, "at": float("nan")}, {"count": 1, "at": float("-inf")},
                                    {"count": True, "at": True}, {"count": "1", "at": "now"}, "failed", None])
def test_a_hostile_failure_record_is_no_failure(tiny_root: Path, monkeypatch: pytest.MonkeyPatch, failed: Any) -> None:
    """The cache file is the user's to edit: a failure record of any shape (an int past any float, NaN, the wrong
    types) neither crashes the choice nor holds a back-off that never ends; the model is measured."""
    tries: list[int] = []
    monkeypatch.setattr(kernels, "_trials", lambda *a: tries.append(1))
    choose_kernels(tiny_root)
    data = json.loads(_cache_file().read_text())
    key = next(iter(data))
    data[key]["failed"] = failed
    _cache_file().write_text(json.dumps(data))
    monkeypatch.setattr(kernels, "_measured_here", set())
    assert choose_kernels(tiny_root).mkldnn is None
    assert len(tries) == 2


@pytest.mark.usefixtures("auto")
def test_a_model_that_is_not_a_checkpoint_keeps_mxnets_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = handler_archive(tmp_path / "noop", {"h.py": "def handle(d, c):\n    return d\n"}, handler="h:handle")
    env = worker_env(1, spec=spec)
    assert "MXNET_MKLDNN_ENABLED" not in env
    assert not _cache_file().exists()


@pytest.mark.usefixtures("auto")
def test_an_input_shape_past_the_ceiling_is_not_measured(tiny_root: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A signature.json is the archive's: a huge input shape must not make the measuring children
    allocate it (MXNet's default stays, nothing is remembered)."""
    import shutil

    tiny_root = Path(shutil.copytree(tiny_root, tmp_path / "huge"))  # the module's checkpoint stays as it is
    monkeypatch.setattr(kernels, "_trials", lambda *a: pytest.fail("a huge input must not be measured"))
    signature = json.loads((tiny_root / "signature.json").read_text())
    signature["inputs"][0]["data_shape"] = [1, 3, 100_000, 100_000]
    (tiny_root / "signature.json").write_text(json.dumps(signature))
    choice = choose_kernels(tiny_root)
    assert choice.mkldnn is None and not _cache_file().exists()


# -- the decision, from recorded trials (no timing here: the trials are data) ------------------------------
ON, OFF = Variant(True), Variant(False)


def _decide(on: list[float], off: list[float], load: float = 0.2, cpus: int = 2, **batched: list[float]) -> Decision:
    decision = decide(Trials({ON: on, OFF: off}, {ON: batched.get("on4", []), OFF: batched.get("off4", [])},
                             rounds=len(on), load=load, cpus=cpus))
    assert decision is not None
    return decision


def test_the_fastest_forward_decides_not_the_mean() -> None:
    """Trials taken while other work loaded the cores: most forwards of both sets slowed down, MKL-DNN's more.
    The mean picks MXNet's own kernels (the choice seen on a busy machine); the minimum, MKL-DNN, as quiet."""
    on = [170.2, 168.0, 17.4, 171.5, 18.0, 165.0]
    off = [106.0, 104.0, 24.8, 108.0, 25.1, 103.0]
    assert statistics.mean(on) > MARGIN * statistics.mean(off)  # what a mean would have decided: off
    decision = _decide(on, off)
    assert (decision.mkldnn, decision.on_ms, decision.off_ms) == (True, 17.4, 24.8)
    assert not decision.confident and "trials spread" in decision.doubt  # disturbed: measured again later


@pytest.mark.parametrize("off_ms, mkldnn, thin", [(20.0, True, False), (16.0, True, False), (15.2, True, True),
                                                  (14.4, False, True), (13.0, False, False), (8.0, False, False)])
def test_mkldnn_stays_unless_off_is_clearly_faster_and_a_ratio_at_the_margin_is_thin(
        off_ms: float, mkldnn: bool, thin: bool) -> None:
    decision = _decide([16.0, 16.1, 16.2], [off_ms, off_ms * 1.01, off_ms * 1.02])
    assert decision.mkldnn is mkldnn
    assert decision.confident is not thin and ("margin" in decision.doubt) is thin


def test_a_busy_machine_makes_a_clear_result_unsure() -> None:
    quiet = _decide([10.0, 10.1, 10.2], [20.0, 20.1, 20.3], load=0.4, cpus=2)
    busy = _decide([10.0, 10.1, 10.2], [20.0, 20.1, 20.3], load=3.3, cpus=2)
    assert quiet.confident and quiet.doubt == "" and quiet.mkldnn and busy.mkldnn
    assert not busy.confident and busy.doubt == "load average 3.30 on 2 CPUs"


def test_batches_of_four_only_where_they_cost_clearly_less_per_image() -> None:
    assert _decide([10.0, 10.2], [20.0, 20.0], on4=[8.0, 9.0]).batch == kernel_trials.BATCHED
    assert _decide([10.0, 10.2], [20.0, 20.0], on4=[9.8]).batch == 1
    assert _decide([30.0, 30.2], [10.0, 10.0], on4=[1.0], off4=[9.9]).batch == 1  # the chosen set's batch counts


def test_one_set_failing_picks_the_other_unsure_and_neither_is_no_decision() -> None:
    only_off = decide(Trials({OFF: [5.0, 5.1]}, {}, rounds=2, load=0.1, cpus=2))
    assert only_off is not None and only_off.mkldnn is False and not only_off.confident
    assert decide(Trials({}, {}, rounds=0)) is None


def test_rounds_alternate_which_set_goes_first() -> None:
    """A B, then B A: a load that rises or falls during the measurement falls on both sets alike."""
    order: list[str] = []

    class Child:
        def __init__(self, variant: Variant) -> None:
            self.variant, self.batched = variant, 0

        def trial(self, count: int, batch: int) -> list[float]:
            order.append("on" if self.variant.mkldnn else "off")
            return [1.0] * count

    trials = Trials()
    children = [Child(ON), Child(OFF)]
    for _ in range(4):
        assert kernel_trials._round(children, trials)  # type: ignore[arg-type]
    assert order == ["on", "off", "off", "on", "on", "off", "off", "on"] and trials.rounds == 4
    assert len(trials.one[ON]) == len(trials.one[OFF]) == 4 * kernel_trials.FORWARDS


def _next_run(monkeypatch: pytest.MonkeyPatch, load_now: float) -> None:
    """What a later process sees: nothing measured by it yet, and the machine's load average *load_now*."""
    monkeypatch.setattr(kernels, "_measured_here", set())
    monkeypatch.setattr(kernels, "_load", lambda: load_now)
    monkeypatch.setattr(kernels.os, "cpu_count", lambda: 2)


@pytest.mark.usefixtures("auto")
def test_an_unsure_choice_is_measured_again_until_sure_and_a_sure_one_is_kept(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _next_run(monkeypatch, 3.5)
    busy = _recorded([170.0, 17.0, 168.0], [106.0, 25.0, 104.0], load=3.5)
    monkeypatch.setattr(kernels, "_trials", busy)
    first = choose_kernels(tiny_root)
    assert (first.mkldnn, first.confident, first.attempts) == (True, False, 1)
    assert "to be measured again: load average 3.50 on 2 CPUs" in first.reason
    assert choose_kernels(tiny_root).attempts == 1 and busy.calls == [2]  # type: ignore[attr-defined]  # once a run
    _next_run(monkeypatch, 3.2)
    assert choose_kernels(tiny_root).attempts == 1  # the machine is as busy: measuring again would not help
    assert choose_kernels(tiny_root, measure_missing=False).attempts == 1  # a worker's spawn never measures
    _next_run(monkeypatch, 0.3)
    quiet = _recorded([17.2, 17.0, 17.1], [24.0, 24.2, 24.1], load=0.2)
    monkeypatch.setattr(kernels, "_trials", quiet)
    second = choose_kernels(tiny_root)
    assert (second.mkldnn, second.on_ms, second.confident, second.attempts) == (True, 17.0, True, 2)
    _next_run(monkeypatch, 0.1)
    monkeypatch.setattr(kernels, "_trials", lambda *a: pytest.fail("a confident choice is not measured again"))
    assert choose_kernels(tiny_root).on_ms == 17.0
    entry = next(iter(json.loads(_cache_file().read_text()).values()))
    assert (entry["confident"], entry["attempts"], entry["load"]) == (True, 2, 0.2)


@pytest.mark.usefixtures("auto")
def test_an_unsure_choice_is_measured_at_most_three_times_keeping_the_quieter(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # each run starts quieter than the kept measurement ran (so it measures again), never quiet: never confident;
    # the third one's trials met a burst of load: the second's, measured under less, stays
    for now, during, on in ((3.0, 3.0, 20.0), (2.0, 1.5, 17.0), (1.1, 2.6, 30.0)):
        _next_run(monkeypatch, now)
        monkeypatch.setattr(kernels, "_trials", _recorded([on, on], [25.0, 25.0], load=during))
        kept = choose_kernels(tiny_root)
        assert kept.mkldnn is True and not kept.confident
    assert (kept.on_ms, kept.load, kept.attempts, kept.settled) == (17.0, 1.5, 3, True)
    _next_run(monkeypatch, 0.0)
    monkeypatch.setattr(kernels, "_trials", lambda *a: pytest.fail("settled after three attempts"))
    assert choose_kernels(tiny_root).on_ms == 17.0


@pytest.mark.usefixtures("auto")
def test_an_entry_from_before_the_interleaved_trials_is_measured_again(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A choice remembered by the old measurement (means of sequential runs: the one a busy machine got wrong)."""
    key = kernels.cache_key(find_checkpoint(tiny_root), 1)
    _cache_file().parent.mkdir(parents=True, exist_ok=True)
    _cache_file().write_text(json.dumps({key: {"mkldnn": False, "on_ms": 170.0, "off_ms": 106.0, "batch": 1}}))
    assert choose_kernels(tiny_root, measure_missing=False).mkldnn is False  # used meanwhile
    _next_run(monkeypatch, 0.2)
    monkeypatch.setattr(kernels, "_trials", _recorded([17.0, 17.1], [24.0, 24.1]))
    assert choose_kernels(tiny_root).mkldnn is True


@pytest.mark.usefixtures("auto")
def test_the_server_measures_an_unsure_choice_again_in_the_background(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _next_run(monkeypatch, 4.0)
    monkeypatch.setattr(kernels, "_trials", _recorded([30.0, 30.0], [20.0, 20.0], load=4.0))
    assert choose_kernels(tiny_root).mkldnn is False and not choose_kernels(tiny_root, measure_missing=False).confident
    _next_run(monkeypatch, 0.5)  # the server starts later, on a quieter machine
    kernels.defer_measurement()
    try:
        env = kernels.kernel_env(tiny_root, model="unsure")
        assert env["MXNET_MKLDNN_ENABLED"] == "0"  # the unsure choice is used meanwhile
        monkeypatch.setattr(kernels, "_trials", _recorded([17.0, 17.0], [24.0, 24.0]))
        measured: list[KernelChoice] = []
        done = threading.Event()
        line = kernels.measure_later("unsure", lambda choice: (measured.append(choice), done.set()))
        assert line is not None and done.wait(30)
        assert measured[0].mkldnn is True and measured[0].confident is True
    finally:
        kernels.defer_measurement(False)
