"""The ``mmsctl`` console entry, and its lean ``predict``: a warm server's answers without the full CLI.

``mmsctl predict MODEL IMAGE…`` with a running local server that serves the same archive spends
most of its time importing typer, rich and httpx before it sends anything. :func:`run`
looks at the command line first: a plain ``predict`` (MODEL, image files, folders or globs,
``-o``, ``-k``/``--top-k`` up to the server's 5, ``-v``, ``-q``) whose MODEL an earlier run worked
out (:func:`mmsctl.predict.warm.find_warm_server` with ``remembered_only``) and whose server is
up is sent from here: ``socket`` and httptools' response parser, one keep-alive connection per
input in flight (twice the model's workers), answers printed as the full CLI prints them. Anything
else, any doubt, any answer that is not a success, and ``MMSCTL_NO_LEAN=1``: the full CLI
(:func:`mmsctl.cli.main.run`) takes the run, nothing having been printed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Iterable, Iterator, NamedTuple, Optional

from mmsctl.cli.cells import cell as _cell

__all__ = ["LeanRequest", "answer_rows", "class_rows", "is_class_list", "parse_predict", "run", "run_lean"]

OUTPUTS = ("table", "wide", "json", "jsonl", "yaml")
#: The classes a server's built-in handler answers by default: a larger --top-k runs in-process.
SERVER_TOP_K = 5
#: The table columns (header, row key, only with ``-o wide``, justify), shared with :mod:`mmsctl.cli.predict`.
CLASS_COLUMNS = (("Input", "input", False, "left"), ("Rank", "rank", False, "right"),
                 ("Class", "class", False, "left"), ("Probability", "probability", False, "right"),
                 ("Status", "status", True, "right"))
ANSWER_COLUMNS = (("Input", "input", False, "left"), ("Result", "result", False, "left"),
                  ("Status", "status", True, "right"))
#: Seconds to wait for each answer (the full path's default).
_TIMEOUT_S = 60.0


class LeanRequest(NamedTuple):
    """A ``predict`` command line the lean path may serve (a NamedTuple: no ``dataclasses`` on the lean path, see
    tests/cli/test_lazy_imports.py)."""

    model: str
    inputs: list[str]
    output: str = "table"
    top_k: Optional[int] = None
    verbose: bool = False
    quiet: bool = False


def run(argv: Optional[list[str]] = None) -> None:
    """Entry point of the ``mmsctl`` console script: the lean predict where it can answer, else the full CLI."""
    args = list(sys.argv[1:] if argv is None else argv)
    code = run_lean(args)
    if code is not None:
        sys.exit(code)
    from mmsctl.cli.main import run as full_run

    full_run(argv)


def run_lean(args: list[str]) -> Optional[int]:
    """Serve *args* on the lean path and return the exit code; None (nothing printed) where the full CLI must."""
    if os.environ.get("MMSCTL_NO_LEAN") or not args or args[0] != "predict":
        return None
    request = parse_predict(args[1:])
    if request is None:
        return None
    try:
        found = _answers(request)
    except Exception:  # noqa: BLE001 - any doubt, a bug included, is the full path's, and nothing is printed yet
        return None
    if found is None:
        return None
    target, answers, skipped = found
    try:
        for line in skipped:  # as the full CLI warns
            sys.stderr.write(f"warning: {line}\n")
        if request.verbose:
            state = target.state
            sys.stderr.write(f"predict: sent to the local server {state.name} ({state.inference_url}), "
                             f"which serves this archive as {target.model} (lean path)\n")
            sys.stderr.flush()
        emit(request.output, answers)
    except BrokenPipeError:  # `| head`: as the full CLI, quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _answers(request: LeanRequest) -> Optional[tuple[Any, list[Any], list[str]]]:
    """The warm server, its answers to every input and the lines naming files skipped in folders, or None."""
    from mmsctl.predict.warm import find_warm_server

    target = find_warm_server(request.model, remembered_only=True)
    if target is None:
        return None
    from mmsctl.errors import MmsError
    from mmsctl.predict.inputs import expand_inputs

    skipped: list[str] = []
    try:
        sources = expand_inputs(request.inputs, skipped.append)
    except MmsError:
        return None  # the full path says why
    if any(s.kind != "file" for s in sources):
        return None  # stdin, URLs and missing files: the full path
    if len(sources) > 1 and not request.quiet and _terminal(sys.stderr):
        return None  # the full path shows a progress bar
    from mmsctl.predict.warm_client import predict_all

    answers = predict_all(target, sources, top_k=request.top_k, timeout=_TIMEOUT_S)
    if answers is None or not all(a.ok for a in answers):
        return None  # a failed input: the full path prints it, and exits as it does
    return target, answers, skipped


def parse_predict(args: list[str]) -> Optional[LeanRequest]:
    """The options after ``predict``, where every one is one the lean path knows (else None)."""
    positional: list[str] = []
    output, top_k, verbose, quiet = "table", None, False, False
    it = iter(args)
    for arg in it:
        if arg in ("-v", "--verbose"):
            verbose = True
        elif arg in ("-q", "--quiet"):
            quiet = True
        elif arg in ("-o", "--output") or arg.startswith("--output="):
            output = arg.partition("=")[2] if "=" in arg else next(it, "")
        elif arg in ("-k", "--top-k") or arg.startswith("--top-k="):
            value = arg.partition("=")[2] if "=" in arg else next(it, "")
            if not value.isdigit() or not 1 <= int(value) <= SERVER_TOP_K:
                return None
            top_k = int(value)
        elif arg.startswith("-"):
            return None  # another option, stdin (-), or `--`: the full path
        else:
            positional.append(arg)
    if len(positional) < 2 or output not in OUTPUTS:
        return None
    return LeanRequest(positional[0], positional[1:], output, top_k, verbose, quiet)


def is_class_list(result: Any) -> bool:
    """An image classifier's answer: a list of {class|label, probability|score}."""
    return isinstance(result, list) and bool(result) and all(
        isinstance(r, dict) and ("class" in r or "label" in r) and ("probability" in r or "score" in r)
        for r in result)


def class_rows(predictions: Iterable[Any]) -> Iterator[dict[str, Any]]:
    for p in predictions:
        for rank, entry in enumerate(p.result(), 1):
            yield {
                "input": p.input,
                "rank": rank,
                "class": entry.get("class", entry.get("label")),
                "probability": entry.get("probability", entry.get("score")),
                "status": p.status,
            }


def answer_rows(predictions: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """One row per input for answers that are not class lists (a handler's own JSON, text)."""
    for p in predictions:
        result = p.result()
        text = result if isinstance(result, str) else json.dumps(result, separators=(", ", ": "))
        yield {"input": p.input, "result": " ".join(text.split())[:200], "status": p.status}


def emit(output: str, answers: list[Any]) -> None:
    """Print successful answers as :func:`mmsctl.cli.predict._emit` does."""
    out = sys.stdout
    if output == "jsonl":
        out.write("".join(json.dumps(p.to_dict(), ensure_ascii=False, default=str) + "\n" for p in answers))
    elif output == "json" and len(answers) == 1:
        _write_body(answers[0].body)
    elif output == "json":
        out.write(json.dumps([p.to_dict() for p in answers], indent=2, ensure_ascii=False, default=str) + "\n")
    elif output == "yaml":
        import yaml

        data = answers[0].result() if len(answers) == 1 else [p.to_dict() for p in answers]
        out.write(yaml.safe_dump(json.loads(json.dumps(data, default=str)), sort_keys=False))
    else:
        classes = all(is_class_list(p.result()) for p in answers)
        rows = list(class_rows(answers) if classes else answer_rows(answers))
        _table(rows, CLASS_COLUMNS if classes else ANSWER_COLUMNS, wide=output == "wide")
    out.flush()


def _write_body(body: bytes) -> None:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        sys.stdout.flush()
        sys.stdout.buffer.write(body)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _terminal(stream: Any) -> bool:
    """Where rich may think it writes to a terminal (a tty, or told so): rich decides there, as the full path."""
    return bool(stream.isatty()) or any(os.environ.get(k) for k in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"))


def _table(rows: list[dict[str, Any]], columns: tuple[tuple[str, str, bool, str], ...], *, wide: bool) -> None:
    """:func:`mmsctl.cli.render.render_table`: rich's table on a terminal (imported only then), else plain columns."""
    cols = [c for c in columns if wide or not c[2]]
    if _terminal(sys.stdout):
        from mmsctl.cli.render import Column, render_table

        render_table(rows, [Column(*c) for c in cols], wide=wide)
        return
    matrix = [[c[0].upper() for c in cols]] + [[_cell(r.get(c[1])) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in matrix) for i in range(len(cols))]
    sys.stdout.write("".join("   ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() + "\n"
                             for line in matrix))
