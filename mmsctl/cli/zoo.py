"""`mmsctl zoo`: the MMS model zoo and the local download cache.

    mmsctl zoo list [-o wide|json|yaml] [--cached]
    mmsctl zoo pull squeezenet resnet-18 [--force]
    mmsctl zoo path squeezenet
    mmsctl zoo rm squeezenet
    mmsctl zoo clean
"""

from __future__ import annotations

from typing import Any

import typer

from mmsctl.cli.options import OutputOpt, check_output, complete_zoo_names, output_option, option
from mmsctl.cli.render import Column, get_ui, human_size, render_data, render_table

__all__ = ["register"]

zoo_app = typer.Typer(
    name="zoo",
    help="The MMS model zoo: list names, pull archives into the cache, find or remove them. "
    "Mirror: MMSCTL_ZOO_URL (http(s) URL or folder); offline: MMSCTL_OFFLINE=1.",
    no_args_is_help=True,
)

_LIST_COLUMNS = (
    Column("Name", "name"),
    Column("Aliases", "aliases"),
    Column("Type", "task"),
    Column("Framework", "framework"),
    Column("Size", "size_h", justify="right"),
    Column("Cached", "cached_h"),
    Column("Title", "title", wide=True),
    Column("Dataset", "dataset", wide=True),
    Column("Path", "path", wide=True),
    Column("URL", "url", wide=True),
)


@zoo_app.command("list")
def list_models(
    output: str = OutputOpt,
    cached: bool = typer.Option(False, "--cached", help="Only archives already in the cache."),
) -> None:
    """List the zoo's models (name, aliases, type, size) and whether each is cached."""
    check_output(output)
    from mmsctl.zoo.listing import zoo_rows

    rows = zoo_rows(cached_only=cached)
    if render_data(rows, output):
        return
    if not rows:
        get_ui().message("no archives in the cache" if cached else "the zoo catalog is empty")
        return
    for row in rows:
        row["size_h"] = human_size(row["size"]) if row["cached"] else (
            "~" + human_size(row["size"]) if row["size"] else None  # type: ignore[operator]
        )
        row["cached_h"] = "yes" if row["cached"] else "no"
    render_table(rows, _LIST_COLUMNS, wide=output == "wide")


@zoo_app.command("pull")
def pull(
    names: list[str] = typer.Argument(..., help="Zoo names, aliases or http(s) URLs.", metavar="NAME...",
                                      autocompletion=complete_zoo_names),
    force: bool = option("--force", False, help="Download again even if cached."),
    output: str = output_option("path", "json", "yaml"),
) -> None:
    """Download archives into the cache (or a mirror's copy) and print their paths."""
    check_output(output, ("path", "json", "yaml"))
    from mmsctl.errors import MmsError, PartialFailure
    from mmsctl.zoo.resolve import pull_model

    ui = get_ui()
    results: list[dict[str, Any]] = []
    failures: list[MmsError] = []
    _only_zoo(names)
    for name in names:
        try:
            model = pull_model(name, progress=not ui.quiet, force=force)
        except MmsError as exc:
            if len(names) == 1:
                raise
            ui.error(f"{name}: {exc.message}", exc.hint)
            failures.append(exc)
            continue
        size = model.path.stat().st_size if model.path.is_file() else None
        verb = {"download": "downloaded", "cache": "already cached", "mirror": "in the mirror folder"}
        ui.message(f"{model.name}: {verb.get(model.source, model.source)} ({human_size(size) or 'folder'})")
        results.append(
            {"name": model.name, "path": str(model.path), "source": model.source,
             "origin": model.origin, "size": size}
        )
    if not render_data(results, output):
        for item in results:
            ui.out.file.write(item["path"] + "\n")
        ui.out.file.flush()
    if failures:
        raise PartialFailure(f"{len(failures)} of {len(names)} models could not be pulled")


@zoo_app.command("path")
def path(name: str = typer.Argument(..., help="Zoo name, alias or URL.", metavar="NAME",
                                    autocompletion=complete_zoo_names)) -> None:
    """Print where NAME's archive is on disk (cache or mirror folder); never downloads."""
    from mmsctl.errors import ModelNotFoundError, OfflineError
    from mmsctl.zoo.resolve import resolve_model

    _only_zoo([name])
    try:
        model = resolve_model(name, offline=True, progress=False)
    except OfflineError:
        raise ModelNotFoundError(
            f"{name} is not in the cache", hint=f"download it with: mmsctl zoo pull {name}"
        ) from None
    ui = get_ui()
    ui.out.file.write(str(model.path) + "\n")
    ui.out.file.flush()


@zoo_app.command("rm")
def rm(
    names: list[str] = typer.Argument(..., help="Zoo names, aliases or URLs.", metavar="NAME...",
                                      autocompletion=complete_zoo_names),
) -> None:
    """Remove cached archives."""
    from mmsctl.errors import ModelNotFoundError
    from mmsctl.zoo import cache
    from mmsctl.zoo.resolve import cached_model

    ui = get_ui()
    _only_zoo(names)
    keep = _running_servers()
    missing = [n for n in names if cached_model(n) is None]
    if missing:
        raise ModelNotFoundError(
            f"not in the cache: {', '.join(missing)}", hint="see `mmsctl zoo list --cached`"
        )
    for name in names:
        model = cached_model(name)
        if model is None:  # removed twice on one command line
            continue
        freed = cache.remove(model.path, extracted=not keep)
        ui.message(f"removed {model.name} ({human_size(freed)})")
    _warn_kept(keep)


@zoo_app.command("clean")
def clean() -> None:
    """Empty the cache: archives, their extracted copies, leftovers of interrupted downloads."""
    from mmsctl.zoo import cache

    keep = _running_servers()
    count, copies, freed = cache.clean(extracted=not keep)
    extracted = f" and {copies} extracted cop{'ies' if copies != 1 else 'y'}" if copies else ""
    get_ui().message(f"removed {count} archive{'s' if count != 1 else ''}{extracted}, freed {human_size(freed)}")
    _warn_kept(keep)


def _only_zoo(names: list[str]) -> None:
    """Zoo commands always mean the zoo: a word is a zoo name even where a folder of that name is
    here; a path (``./x``, ``x.mar``) is refused rather than quietly used."""
    from mmsctl.errors import UsageError
    from mmsctl.names import model_location

    for name in names:
        where = model_location(name)
        if where.kind == "path" or where.name is not None:
            raise UsageError(f"{name!r} is not a zoo name or an http(s) URL",
                             hint="`mmsctl zoo list` shows the names; local archives need no zoo command")


def _running_servers() -> list[str]:
    """Names of running `mmsctl serve` instances: their workers load from the extracted copies."""
    from mmsctl.local_servers import list_instances

    return [i.name for i in list_instances() if i.running_state() is not None]


def _warn_kept(servers: list[str]) -> None:
    if servers:
        get_ui().warn(
            f"kept the extracted model copies: mmsctl server {', '.join(servers)} is running "
            "(its workers load from them); stop it and run `mmsctl zoo clean` again to free them"
        )


def register(app: typer.Typer) -> None:
    """Add the ``zoo`` group to the root command."""
    app.add_typer(zoo_app)
