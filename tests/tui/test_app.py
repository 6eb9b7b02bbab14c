"""The monitor driven headless with Textual's pilot, on an injected data source."""

from __future__ import annotations


import pytest

from mmsctl.tui.app import TopApp
from mmsctl.tui.screens.dialogs import ConfirmScreen, HelpScreen, RegisterScreen
from mmsctl.tui.screens.model_detail import ModelScreen
from mmsctl.tui.widgets.models_table import ModelsTable
from tests.tui.support import (
    ScriptedSource,
    assert_snapshot,
    mms_snapshot,
    mmsctl_snapshot,
    screen_text,
    unreachable,
    wait_for,
    wait_settled,
)

pytestmark = pytest.mark.anyio

SIZE = (110, 24)


def _app(source: ScriptedSource, **kwargs: object) -> TopApp:
    # A long interval: the tests poll when they want to (app.poll), so nothing races them.
    return TopApp(source, interval=kwargs.pop("interval", 30.0), clock=False, **kwargs)  # type: ignore[arg-type]


async def _started(pilot, app: TopApp, polls: int = 1) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: app.polls >= polls)
    await wait_settled(pilot, app)


def _table(app: TopApp) -> ModelsTable:
    return app.screen.query_one(ModelsTable)


# --------------------------------------------------------------------------- snapshots


async def test_snapshot_models_screen() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        assert_snapshot("models_mmsctl", screen_text(app))


async def test_snapshot_mms_shows_unavailable_not_zero() -> None:
    app = _app(ScriptedSource([mms_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        text = screen_text(app)
        assert_snapshot("models_mms", text)
        row = next(line for line in text.splitlines() if line.lstrip().startswith("squeezenet_v1.1"))
        assert row.split()[-5:] == ["n/a"] * 5  # queue, req/s, p50, p99, err/s


async def test_snapshot_model_detail() -> None:
    source = ScriptedSource([mmsctl_snapshot(100.0, rps=r) for r in (1.0, 4.0, 9.0, 16.0, 12.5)])
    app = _app(source)
    async with app.run_test(size=(110, 30)) as pilot:
        await _started(pilot, app)
        for n in range(2, 6):
            app.poll()
            await wait_for(pilot, lambda n=n: app.polls >= n)
        await pilot.press("down", "down", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.pause()
        assert source.focus == "squeezenet@1.0"  # the source describes it on every poll now
        assert_snapshot("model_detail", screen_text(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ModelScreen))
        assert source.focus is None


async def test_snapshot_help_overlay() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=(110, 30)) as pilot:
        await _started(pilot, app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause()
        assert_snapshot("help", screen_text(app))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))


# --------------------------------------------------------------------------- sort and filter


async def test_sort_with_keys_and_header_click() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        table = _table(app)
        assert table.shown_keys == ["noop@2.0", "resnet-18@1.0", "squeezenet@1.0"]
        for _ in range(7):  # NAME -> ... -> REQ/S (busiest first)
            await pilot.press("greater_than_sign")
        assert table.sort_column == "rps"
        assert table.shown_keys == ["noop@2.0", "squeezenet@1.0", "resnet-18@1.0"]
        await pilot.press("less_than_sign")
        assert table.sort_column == "queue"
        # Header click: P99, slowest first; unknown (resnet, no traffic) stays last either way.
        table.post_message(ModelsTable.HeaderSelected(table, table.columns["p99"].key, 9, table.columns["p99"].label))  # type: ignore[index]
        await pilot.pause()
        assert table.sort_column == "p99" and table.reverse
        assert table.shown_keys == ["squeezenet@1.0", "noop@2.0", "resnet-18@1.0"]
        table.post_message(ModelsTable.HeaderSelected(table, table.columns["p99"].key, 9, table.columns["p99"].label))  # type: ignore[index]
        await pilot.pause()
        assert not table.reverse
        assert table.shown_keys == ["noop@2.0", "squeezenet@1.0", "resnet-18@1.0"]


def _header(app: TopApp) -> str:
    return next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("NAME"))


async def test_the_sort_arrow_is_on_the_sort_column() -> None:
    """Issue 10: the arrow showed only on NAME (a label that grew was cut to its column's width)."""
    from mmsctl.tui.widgets.models_table import COLUMNS

    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        table = _table(app)
        for column in COLUMNS:
            if table.sort_column != column.key:
                await pilot.press("greater_than_sign")
                await pilot.pause()
            arrow = "▼" if table.reverse else "▲"
            header = _header(app)
            assert f"{column.label}{arrow}" in header, header
            assert header.count("▲") + header.count("▼") == 1, header
        # Reversing flips the arrow in place.
        table.sort_by(table.sort_column)
        await pilot.pause()
        assert f"{COLUMNS[-1].label}{'▼' if table.reverse else '▲'}" in _header(app)


async def test_home_end_and_pages_move_the_cursor() -> None:
    """Issue 10: Home/End go to the first/last row (DataTable gives them to the columns)."""
    import dataclasses

    base = mmsctl_snapshot()
    many = dataclasses.replace(base, models=tuple(dataclasses.replace(base.models[0], name=f"m{i:02d}")
                                                  for i in range(40)))
    app = _app(ScriptedSource([many]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        table = _table(app)
        assert table.current_key == "m00@1.0"
        await pilot.press("end")
        await pilot.pause()
        assert table.current_key == "m39@1.0"
        assert " m39 " in screen_text(app)  # scrolled into view
        await pilot.press("home")
        await pilot.pause()
        assert table.current_key == "m00@1.0" and " m00 " in screen_text(app)
        await pilot.press("pagedown")
        await pilot.pause()
        after_page = table.cursor_row
        assert after_page > 5
        await pilot.press("down")
        assert table.cursor_row == after_page + 1
        await pilot.press("pageup")
        await pilot.pause()
        assert table.cursor_row < after_page
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.current_key == "m39@1.0"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        assert app.screen.key == "m39@1.0"


async def test_real_header_click_sorts() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        table = _table(app)
        region = table.region
        # Click the header row above the VERSION column (second column, a few cells in).
        name_width = table.columns["name"].get_render_width(table)  # type: ignore[index]
        await pilot.click(ModelsTable, offset=(name_width + 2, 0))
        await pilot.pause()
        assert table.sort_column == "version", region


async def test_filter_is_a_regex_and_escape_clears_it() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("slash")
        await pilot.press(*"^(res|noo)")
        await pilot.pause()
        assert _table(app).shown_keys == ["noop@2.0", "resnet-18@1.0"]
        await pilot.press("enter")  # back to the table, filter kept
        assert _table(app).has_focus
        assert _table(app).shown_keys == ["noop@2.0", "resnet-18@1.0"]
        await pilot.press("escape")
        await pilot.pause()
        assert len(_table(app).shown_keys) == 3


async def test_bad_regex_is_reported_not_fatal() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("slash", "left_square_bracket")
        await pilot.pause()
        assert "bad filter" in screen_text(app)
        assert len(_table(app).shown_keys) == 3


# --------------------------------------------------------------------------- actions


async def test_plus_asks_then_scales_and_minus_can_be_cancelled() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("down", "down")  # squeezenet (sorted by name)
        assert _table(app).current_key == "squeezenet@1.0"
        await pilot.press("plus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "from 2 to 3" in screen_text(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(source.calls))
        assert source.calls == [("scale", ("squeezenet", 3, 3), {"version": None})]
        await pilot.press("minus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert len(source.calls) == 1
        await pilot.press("minus")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "Press y to confirm; n, Esc or Enter cancels." in screen_text(app)  # Enter is not a yes here
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert len(source.calls) == 1


async def test_scale_keeps_a_wider_max() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("down")  # resnet-18: min 1, max 3
        await pilot.press("plus", "y")
        await wait_for(pilot, lambda: bool(source.calls))
        assert source.calls[0][1] == ("resnet-18", 2, 3)


async def test_unregister_and_register() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: len(source.calls) == 1)
        assert source.calls[0][:2] == ("unregister", ("noop",))
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RegisterScreen))
        await pilot.press(*"noop.mar")
        await pilot.press("tab", *"noop2", "tab", "backspace", "2", "enter")
        await wait_for(pilot, lambda: len(source.calls) == 2)
        assert source.calls[1] == ("register", ("noop.mar",), {"model_name": "noop2", "initial_workers": 2})
        await wait_for(pilot, lambda: "registered" in screen_text(app))


async def test_readonly_refuses_actions() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source, readonly=True)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("plus", "d", "r")
        await pilot.pause()
        assert not isinstance(app.screen, (ConfirmScreen, RegisterScreen))
        assert "read-only" in screen_text(app)
        assert source.calls == []


async def test_action_error_goes_to_the_status_line() -> None:
    from mmsctl.errors import ApiError

    class Refusing(ScriptedSource):
        async def scale(self, *args: object, **kwargs: object) -> str:
            raise ApiError("Model noop not found (HTTP 404)", status=404)

    app = _app(Refusing([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("plus", "y")
        await wait_for(pilot, lambda: "failed: Model noop not found" in screen_text(app))


async def test_a_sagemaker_endpoint_refuses_register_and_unregister_naming_the_commands() -> None:
    """An endpoint serves one model: r and d are refused on the status line, in the CLI's words."""
    from mmsctl.cli.top import one_model_words
    from mmsctl.tui.sagemaker_source import SageMakerSource

    class Endpoint(ScriptedSource):
        one_model = one_model_words("kitten")
        register = SageMakerSource.register
        unregister = SageMakerSource.unregister

    source = Endpoint([mmsctl_snapshot()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("d", "y")
        await wait_for(pilot, lambda: "failed: a SageMaker endpoint serves one model: `mmsctl sagemaker update "
                                      "kitten --model MODEL` changes it" in screen_text(app))
    assert source.calls == []


# --------------------------------------------------------------------------- resilience


async def test_dead_server_keeps_last_data_and_recovers() -> None:
    source = ScriptedSource([mmsctl_snapshot(), unreachable(), mmsctl_snapshot(300.0)])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        app.poll()
        await wait_for(pilot, lambda: app.polls >= 2)
        await pilot.pause()
        text = screen_text(app)
        assert "unreachable" in text and "connection refused" in text and "retrying" in text
        assert "squeezenet" in text  # the last data stays on screen
        app.poll()
        await wait_for(pilot, lambda: app.polls >= 3)
        await pilot.pause()
        text = screen_text(app)
        assert "Healthy" in text and "connection refused" not in text


async def test_slow_server_never_freezes_the_screen() -> None:
    source = ScriptedSource([mmsctl_snapshot()], delay=30.0)
    app = _app(source, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.3)  # several timer ticks while the first poll hangs
        assert source.started == 1  # no pile-up of polls behind the slow one
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), timeout=2.0)
        assert app.polls == 0


async def test_pause_stops_polling() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source, interval=0.1)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app, polls=2)
        await pilot.press("p")
        await pilot.pause(0.05)
        paused_at = source.fetches
        await pilot.pause(0.4)
        assert source.fetches == paused_at
        assert "PAUSED" in screen_text(app)
        await pilot.press("p")
        await wait_for(pilot, lambda: source.fetches > paused_at)


async def test_command_palette_offers_our_commands() -> None:
    app = _app(ScriptedSource([mmsctl_snapshot()]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for wanted in ("Help", "Pause / resume", "Filter models", "Scale up", "Register model"):
            assert wanted in titles
        await pilot.press("ctrl+p")
        await pilot.press(*"Scale up")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))


async def test_quit_closes_the_source() -> None:
    source = ScriptedSource([mmsctl_snapshot()])
    app = _app(source)
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        await pilot.press("q")
    assert source.closed


async def test_cells_that_grow_are_shown_whole() -> None:
    """A latency that appears after an idle poll widens its column instead of being cut."""
    import dataclasses

    base = mmsctl_snapshot()
    idle = dataclasses.replace(base, models=tuple(dataclasses.replace(m, p50_ms=None, p99_ms=None)
                                                  for m in base.models))
    busy = dataclasses.replace(
        base,
        taken_at=200.0,
        models=tuple(dataclasses.replace(m, p50_ms=17.5, p99_ms=1234.5) if m.name == "resnet-18" else m
                     for m in idle.models),
    )
    app = _app(ScriptedSource([idle, busy]))
    async with app.run_test(size=SIZE) as pilot:
        await _started(pilot, app)
        app.poll()
        await wait_for(pilot, lambda: app.polls >= 2)
        await pilot.pause()
        row = next(line for line in screen_text(app).splitlines() if line.lstrip().startswith("resnet-18"))
        assert "17.5ms" in row and "1.2s" in row, row
