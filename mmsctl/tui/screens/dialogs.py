"""Modal dialogs: confirm an action, fill in a registration, show the key help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

__all__ = ["ConfirmScreen", "HelpScreen", "RegisterRequest", "RegisterScreen"]


class ConfirmScreen(ModalScreen[bool]):
    """Yes/no for one action: only ``y`` (or the Yes button) confirms; ``n``, Esc, and Enter on the focused
    No button cancel. The dialog says so: Enter confirms in many tools, and here it must not surprise."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            yield Label(self.question, id="question")
            yield Label("Press y to confirm; n, Esc or Enter cancels.", id="confirm-keys")
            with Horizontal(classes="buttons"):
                yield Button("Yes (y)", variant="warning", id="yes")
                yield Button("No (n)", variant="primary", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


@dataclass(frozen=True)
class RegisterRequest:
    """What the register form asks the server for (``POST /models``)."""

    url: str
    model_name: Optional[str] = None
    initial_workers: int = 1


class RegisterScreen(ModalScreen[Optional[RegisterRequest]]):
    """A small form: archive URL (or a name in the model store), optional name, initial workers."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, *, on_every_member: bool = False) -> None:
        super().__init__()
        self.on_every_member = on_every_member

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="dialog"):
            where = " on every member" if self.on_every_member else ""
            yield Label(f"Register a model{where} (POST /models)", classes="dialog-title")
            yield Label("Archive URL or file in the server's model store:")
            yield Input(placeholder="squeezenet.mar or https://…/model.mar", id="url")
            yield Label("Model name (optional):")
            yield Input(placeholder="from the archive's manifest", id="name")
            yield Label("Initial workers:")
            yield Input(value="1", id="workers", type="integer")
            yield Label("", id="form-error")
            with Horizontal(classes="buttons"):
                yield Button("Register", variant="warning", id="register")
                yield Button("Cancel", variant="primary", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#url", Input).focus()

    def _submit(self) -> None:
        url = self.query_one("#url", Input).value.strip()
        name = self.query_one("#name", Input).value.strip() or None
        workers_text = self.query_one("#workers", Input).value.strip() or "1"
        error = self.query_one("#form-error", Label)
        if not url:
            error.update("the archive URL is required")
            return
        try:
            workers = int(workers_text)
        except ValueError:
            workers = -1
        if workers < 0:
            error.update("initial workers must be a whole number >= 0")
            return
        self.dismiss(RegisterRequest(url, name, workers))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "register":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


HELP_TEXT = """\
[b]mmsctl top[/b] - a live monitor for MMS, TorchServe and mmsctl servers

[b]Models list[/b]
  ↑ ↓ PgUp PgDn   move              Enter   open the model
  Home End        first / last row
  < >             sort column       click   sort (again: reverse)
  /               filter (regex)    Esc     clear the filter

[b]Actions[/b] (each asks first; off with --readonly; a fleet: every member)
  + -             scale the model's workers up / down by one
  r               register a model   d      unregister the model

[b]Fleet[/b] (a context with members)
  m               members: state, models, workers, errors (m, Esc: back)

[b]Anywhere[/b]
  p  pause / resume polling     ctrl+p  command palette
  ?  this help                  q       quit

Numbers: [b]n/a[/b] = the server does not publish it (real MMS has no metrics),
[b]-[/b] = nothing to measure in the last interval (no requests),
[b]mixed[/b] = the members of a fleet differ.
"""


class HelpScreen(ModalScreen[None]):
    """The key reference; any of Esc, ``?`` or ``q`` closes it."""

    BINDINGS = [Binding("escape,question_mark,q", "close", "Close")]

    def compose(self) -> ComposeResult:
        with Grid(id="help", classes="dialog"):
            yield Static(HELP_TEXT, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
