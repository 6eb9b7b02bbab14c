"""How commands show results: data on stdout, messages on stderr.

Every read command takes ``-o table|wide|json|yaml`` (some add ``jsonl``).
Tables are rich tables on a terminal and plain, aligned columns when piped (so
``| awk`` and ``| grep`` work like with kubectl). ``NO_COLOR`` is honoured by
rich; ``-q`` silences messages but never data.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Sequence

from rich.console import Console

from mmsctl.cli.cells import cell as _cell

__all__ = [
    "OUTPUT_FORMATS",
    "Column",
    "UI",
    "get_ui",
    "human_size",
    "render_data",
    "render_removal",
    "render_table",
    "set_ui",
]

OUTPUT_FORMATS = ("table", "wide", "json", "yaml", "jsonl")


@dataclass
class UI:
    """The two consoles of one command run, and the quiet flag."""

    out: Console = field(default_factory=lambda: Console(soft_wrap=True))
    err: Console = field(default_factory=lambda: Console(stderr=True, soft_wrap=True))
    quiet: bool = False
    debug: bool = False

    def message(self, text: str) -> None:
        """A progress or status line on stderr (hidden by ``-q``)."""
        if not self.quiet:
            self.err.print(text, highlight=False)

    def warn(self, text: str) -> None:
        """A warning on stderr; shown even with ``-q``."""
        self.err.print(f"[yellow]warning:[/yellow] {_escape(text)}", highlight=False)

    def error(self, text: str, hint: Optional[str] = None) -> None:
        self.err.print(f"[bold red]error:[/bold red] {_escape(text)}", highlight=False)
        if hint:
            self.err.print(f"[dim]hint:[/dim] {_escape(hint)}", highlight=False)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


_ui: Optional[UI] = None


def get_ui() -> UI:
    """The UI of this run, created lazily (tests replace it with :func:`set_ui`)."""
    global _ui
    if _ui is None:
        _ui = UI()
    return _ui


def set_ui(ui: Optional[UI]) -> None:
    global _ui
    _ui = ui


@dataclass(frozen=True)
class Column:
    """One table column: a header, the key in each row dict, and whether only ``-o wide`` shows it."""

    header: str
    key: str
    wide: bool = False
    justify: str = "left"


def render_table(
    rows: Iterable[dict[str, Any]],
    columns: Sequence[Column],
    *,
    wide: bool = False,
    title: Optional[str] = None,
    ui: Optional[UI] = None,
) -> None:
    """Print rows as a rich table on a terminal, or aligned plain columns when piped."""
    ui = ui or get_ui()
    cols = [c for c in columns if wide or not c.wide]
    rows = list(rows)
    if ui.out.is_terminal:
        from rich.table import Table

        table = Table(title=title, header_style="bold", box=None, pad_edge=False)
        for c in cols:
            table.add_column(c.header, justify=c.justify)  # type: ignore[arg-type]
        for row in rows:
            table.add_row(*(_escape(_cell(row.get(c.key))) for c in cols))
        ui.out.print(table)
        return
    matrix = [[c.header.upper() for c in cols]] + [[_cell(r.get(c.key)) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in matrix) for i in range(len(cols))]
    for line in matrix:
        text = "   ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip()
        ui.out.file.write(text + "\n")
    ui.out.file.flush()


def render_data(data: Any, output: str, *, ui: Optional[UI] = None) -> bool:
    """Print *data* as json/yaml/jsonl and return True; return False for table formats."""
    ui = ui or get_ui()
    out = ui.out.file
    if output == "json":
        out.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")
    elif output == "jsonl":
        items = data if isinstance(data, list) else [data]
        for item in items:
            out.write(json.dumps(item, ensure_ascii=False, default=str) + "\n")
    elif output == "yaml":
        import yaml

        out.write(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False))
    else:
        return False
    out.flush()
    return True


def render_removal(data: Any, output: str, deleted: Sequence[dict[str, Any]], *, nothing: str,
                   id_header: str = "Resource", notes: Iterable[str] = ()) -> None:
    """What a destroy or cleanup removed: *data* as json/yaml, else a table of the *deleted* rows (``kind``,
    ``id``) or the *nothing* line when there were none, then the *notes* (what was kept, and why)."""
    if render_data(data, output):
        return
    ui = get_ui()
    if deleted:
        render_table(deleted, (Column("Deleted", "kind"), Column(id_header, "id")))
    else:
        ui.message(nothing)
    for note in notes:
        ui.message(note)


def human_size(size: Optional[int]) -> Optional[str]:
    """A byte count for people (rich's decimal units: ``2.9 MB``); None stays None."""
    if size is None:
        return None
    from rich.filesize import decimal

    return decimal(int(size))
