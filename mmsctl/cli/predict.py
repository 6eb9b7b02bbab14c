"""``mmsctl predict MODEL INPUT…``: classify images locally, or on a server with ``--context``."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional

import typer

from mmsctl.cli.hints import CommandWords
from mmsctl.cli.lean import ANSWER_COLUMNS, CLASS_COLUMNS, SERVER_TOP_K, answer_rows, class_rows, is_class_list
from mmsctl.cli.options import (
    ContextOpt,
    check_output,
    complete_zoo_names,
    global_context,
    note_model_locations,
    option,
    output_option,
)
from mmsctl.cli.render import UI, Column, get_ui, render_data, render_table
from mmsctl.errors import MmsError, NoHandlerError, WorkerDiedError

__all__ = ["register"]

PREDICT_OUTPUTS = ("table", "wide", "json", "jsonl", "yaml")
_LOCAL_WORDS = CommandWords(
    flags={"gpu_id": "--gpu", "handler": "--handler"},
    hints=(
        (NoHandlerError, "pass --handler module:function, or set one with `mmsctl archive create --handler`"),
        (WorkerDiedError, "run again with --workers 1 to see the error in this process"),
    ),
)

_COLUMNS = tuple(Column(*c) for c in CLASS_COLUMNS)
_ANSWER_COLUMNS = tuple(Column(*c) for c in ANSWER_COLUMNS)

HELP = (
    "Run MODEL on images and print the answers.\n\n"
    "MODEL is a zoo name (squeezenet) or a path: a .mar/.tar.gz/.model archive, a model folder or an "
    "MXNet checkpoint folder. A word is always the zoo's, even with a folder of that name here: write "
    "./NAME for the folder. INPUT is image files, folders (their images, sorted), globs, http(s) URLs "
    "or - for stdin. Each input is sent as the raw request body, so the answer is what "
    "`curl -T INPUT http://host:8080/predictions/MODEL` gets from MMS.\n\n"
    "With --context NAME the inputs go to that server's /predictions/MODEL instead.\n\n"
    "Output: a table of the top classes (other answers: one line each); -o json prints the response "
    "body (one input) or a list of {input, status, result|error} (several); -o jsonl streams one such "
    "object per line. Exit code 4 when some inputs failed (the others are printed)."
)


def _single_failure(p: Any) -> Exception:
    from mmsctl.errors import HandlerError, InputDecodeError

    if p.cause is not None:
        return p.cause
    if 400 <= p.status < 500:
        return InputDecodeError(f"{p.input}: {p.error}")
    return HandlerError(f"{p.input}: {p.error} (HTTP {p.status})")


@contextmanager
def _progress(ui: UI, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for *total* inputs where it is a terminal (not with -q, not for one input);
    yields how to advance it, from any thread."""
    if total < 2 or ui.quiet or not ui.err.is_terminal:
        yield lambda n: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(
        TextColumn("predict"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=ui.err, transient=True,
    ) as bar:
        task = bar.add_task("predict", total=total)
        yield lambda n: bar.advance(task, n)


def _with_progress(ui: UI, total: int, predictions: Iterator[Any]) -> Iterator[Any]:
    with _progress(ui, total) as advance:
        for p in predictions:
            advance(1)
            yield p


def _write_body(ui: UI, body: bytes) -> None:
    """The response body as it is: text gets a final newline, binary bodies are left untouched."""
    out = ui.out.file
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        out.flush()
        raw = getattr(out, "buffer", None)
        if raw is None:
            raise
        raw.write(body)
        raw.flush()
        return
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def _emit(ui: UI, output: str, total: int, predictions: Iterator[Any], *, bar: bool = True) -> None:
    """Print the answers (*bar*: with a progress bar where it applies); raise the input's own error (one
    input) or PartialFailure (several)."""
    from mmsctl.errors import PartialFailure

    done: list[Any] = []
    failed = 0
    for p in _with_progress(ui, total, predictions) if bar else predictions:
        done.append(p)
        if not p.ok:
            failed += 1
            if total > 1:
                ui.error(p.error if str(p.error).startswith(f"{p.input}:") else f"{p.input}: {p.error}")
        if output == "jsonl" and (p.ok or total > 1):
            render_data(p.to_dict(), "jsonl", ui=ui)
    if total == 1 and failed:
        raise _single_failure(done[0])
    good = [p for p in done if p.ok]
    if output in ("json", "yaml"):
        if total == 1:
            if output == "json":
                _write_body(ui, good[0].body)
            else:
                render_data(good[0].result(), "yaml", ui=ui)
        else:
            render_data([p.to_dict() for p in done], output, ui=ui)
    elif output in ("table", "wide"):
        if all(is_class_list(p.result()) for p in good):
            render_table(class_rows(good), _COLUMNS, wide=output == "wide", ui=ui)
        else:  # not a classifier: its answers as they are, one line each
            render_table(answer_rows(good), _ANSWER_COLUMNS, wide=output == "wide", ui=ui)
    if failed:
        raise PartialFailure(f"{failed} of {total} inputs failed")


def _is_cli_process() -> bool:
    """True in the `mmsctl` process itself (console script or ``python -m mmsctl``), not when the
    command runs inside another program (tests, CliRunner, an embedding script)."""
    argv0 = os.path.basename(sys.argv[0]) if sys.argv else ""
    as_module = argv0 == "__main__.py" and os.path.basename(os.path.dirname(sys.argv[0])) == "mmsctl"
    return (argv0 == "mmsctl" or as_module) and sys.stdout is sys.__stdout__ \
        and not os.environ.get("MMSCTL_NO_FAST_EXIT")


def _exit_now() -> None:
    """End a successful local run without tearing the interpreter down.

    With mxnet loaded, freeing its thousands of objects and running its C++ static
    destructors delays the exit after the answer is printed. Exit handlers still run and the
    streams are flushed; only that teardown is skipped. Only in the `mmsctl` process itself.
    """
    if not _is_cli_process():
        return
    import atexit

    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        pass
    atexit._run_exitfuncs()
    os._exit(0)


def _predict_warm(ui: UI, output: str, model: str, sources: list[Any], *, top_k: Optional[int],
                  handler: Optional[str], gpu: Optional[int], verbose: bool) -> str:
    """Send the inputs to a running local server that serves the very same archive (:mod:`mmsctl.predict.warm`);
    "" once done, else why not, having printed nothing (the caller runs in-process)."""
    from mmsctl.predict.warm import warm_server_or_why

    target, why = warm_server_or_why(model, handler=handler, gpu=gpu)
    if target is None:
        return why
    from mmsctl.client.contexts import Context
    from mmsctl.client.inference import InferenceClient
    from mmsctl.predict import predict_remote

    state = target.state
    if len(sources) > 1 and all(s.kind == "file" for s in sources):
        # the lean path's client, which sends a classifier's images in batches (the bar follows its answers)
        from mmsctl.predict.warm_client import predict_all

        with _progress(ui, len(sources)) as advance:
            batched = predict_all(target, sources, top_k=top_k, timeout=60.0, progress=advance)
        if batched is not None:
            if verbose:
                ui.err.print(f"predict: sent to the local server {state.name} ({state.inference_url}), "
                             f"which serves this archive as {target.model}", highlight=False)
            _emit(ui, output, len(sources), iter(batched), bar=False)
            return ""
    remote = Context(f"local:{state.name}", state.inference_url, state.management_url, token_file=state.token_file)
    client = InferenceClient(remote, timeout=60.0, retries=0)
    try:
        answers = predict_remote(client, target.model, sources, top_k=top_k)
        try:
            first = next(answers, None)
        except MmsError as exc:  # unreachable, or its token refused: in-process instead
            return f"the local server {state.name} serves this archive but did not answer it: {exc.message}"
        if first is not None and not first.ok and first.status in (0, 503):  # unreachable, or no worker there now
            now = "has no worker for it now" if first.status == 503 else "cannot be reached"
            return f"the local server {state.name} serves this archive but {now}"
        if verbose:
            ui.err.print(f"predict: sent to the local server {state.name} ({state.inference_url}), "
                         f"which serves this archive as {target.model}", highlight=False)
        _emit(ui, output, len(sources), _chain(first, answers))
    finally:
        client.close()
    return ""


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    if first is not None:
        yield first
    yield from rest


def predict(
    ctx: typer.Context,
    model: str = typer.Argument(..., help="Zoo name (squeezenet), or a path: ./model.mar, ./folder/.",
                                metavar="MODEL", autocompletion=complete_zoo_names),
    inputs: List[str] = typer.Argument(..., help="Image files, folders, globs, URLs or - (stdin).",
                                       metavar="INPUT..."),
    output: str = output_option(*PREDICT_OUTPUTS),
    top_k: Optional[int] = option("--top-k", help="How many classes per input (built-in handler default 5).", min=1),
    batch_size: Optional[int] = option("--batch-size", help="Inputs per forward pass (default 16 for the "
                                       "built-in handler, 1 for others).", min=1),
    handler: Optional[str] = option("--handler", help="Use this handler instead of the archive's "
                                    "(module in the archive, or path/to/file.py)."),
    gpu: Optional[int] = typer.Option(None, "--gpu", metavar="N", min=0, help="Run on GPU N (0 is the first)."),
    workers: Optional[int] = option("--workers", help="Processes that run the model (default: one per CPU "
                                    "core from 64 inputs on, else 1: in this process).", short=False, min=1),
    context: Optional[str] = ContextOpt,
    model_version: Optional[str] = option("--model-version", help="With --context: the model version to call."),
    timeout: float = option("--timeout", 60.0, help="With --context: seconds to wait for each answer."),
    local_only: bool = typer.Option(False, "--local", help="Run the model in this process even when a local "
                                    "server already serves the same archive."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Say on stderr which path was taken "
                                 "(a local server, or in-process)."),
) -> None:
    output = check_output(output, PREDICT_OUTPUTS)
    from mmsctl.predict.inputs import expand_inputs
    from mmsctl.predict import open_model, predict_local, predict_remote, start_service

    ui = get_ui()
    sources = expand_inputs(list(inputs), ui.warn)  # a file a folder holds but is not read is always named
    if len(sources) == 1 and sources[0].error is not None:
        raise sources[0].error  # fail before loading anything
    context_name = global_context(context)
    if context_name:
        from mmsctl.client.contexts import resolve_context
        from mmsctl.client.inference import InferenceClient

        if timeout <= 0:
            from mmsctl.errors import UsageError

            raise UsageError("--timeout must be more than 0")
        remote = resolve_context(context_name)
        if remote.sagemaker:  # a SageMaker endpoint: InvokeEndpoint, signed by botocore
            from mmsctl.cli.aws import aws_session
            from mmsctl.cloud.sagemaker.invoke import SageMakerClient

            client: Any = SageMakerClient(aws_session(remote.region, None, local_service="sagemaker-runtime"),
                                          remote.sagemaker, top_k=top_k if top_k and top_k > SERVER_TOP_K else None)
        elif remote.protocol == "v2":  # the Open Inference Protocol: each input a BYTES tensor
            from mmsctl.client.v2 import V2Client

            client = V2Client(remote, timeout=timeout)
        else:
            client = InferenceClient(remote, timeout=timeout)
        try:
            _emit(ui, output, len(sources),
                  predict_remote(client, model, sources, top_k=top_k, version=model_version))
        finally:
            client.close()
        return

    if local_only:
        why = "--local"
    elif top_k is not None and top_k > SERVER_TOP_K:
        why = f"--top-k {top_k}: a server answers at most {SERVER_TOP_K} classes"
    else:
        why = _predict_warm(ui, output, model, sources, top_k=top_k, handler=handler, gpu=gpu, verbose=verbose)
        if not why:
            return
    if verbose:
        ui.err.print(f"predict: in-process ({why})", highlight=False)
    note_model_locations([model])
    with _LOCAL_WORDS.applied():
        local = open_model(model, progress=not ui.quiet)
        readable = sum(1 for s in sources if s.error is None)
        started = start_service(local, readable, batch_size=batch_size, handler=handler, gpu=gpu, workers=workers)
        try:
            _emit(ui, output, len(sources),
                  predict_local(started.service, sources, batch_size=started.batch_size, top_k=top_k))
        finally:
            started.service.close()
    _exit_now()


def register(app: typer.Typer) -> None:
    app.command("predict", help=HELP, no_args_is_help=True)(predict)
