"""``mmsctl archive create | inspect | extract``: MMS model archives (.mar, .tar.gz, folders, legacy .model)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

import typer

from mmsctl.cli.hints import CommandWords
from mmsctl.cli.options import OutputOpt, check_output, option, output_option
from mmsctl.cli.render import Column, get_ui, human_size, render_data, render_table
from mmsctl.errors import AlreadyExistsError, NoCheckpointError

__all__ = ["register"]

archive_app = typer.Typer(
    name="archive",
    help="Create, inspect and extract MMS model archives (.mar, .tar.gz, folders, legacy .model).",
    no_args_is_help=True,
)

_FILE_COLUMNS = (Column("Path", "path"), Column("Size", "size", justify="right"), Column("Bytes", "bytes", wide=True, justify="right"))


def _split(values: Optional[List[str]]) -> list[Path]:
    """``--extra-files a,b --extra-files c`` -> [a, b, c] (model-archiver takes a comma list)."""
    out: list[Path] = []
    for value in values or []:
        out.extend(Path(v.strip()) for v in value.split(",") if v.strip())
    return out


# `archive create`'s options, named like model-archiver's.
_ModelDirArg: Optional[Path] = typer.Argument(
    None, help="Folder with the model files (an MXNet checkpoint, or your handler and files).", show_default=False,
    metavar="MODEL_DIR")
_ModelPathOpt: Optional[Path] = typer.Option(
    None, "--model-path", help="Same as the MODEL_DIR argument (model-archiver's spelling).", show_default=False,
    metavar="DIR")
_FromOnnxOpt: Optional[Path] = typer.Option(
    None, "--from-onnx", help="Import an ONNX model (fp16 weights become fp32) instead of a folder.",
    show_default=False, metavar="FILE")
_ModelNameOpt: Optional[str] = option("--model-name", help="Model name (default: the folder or ONNX file name).", show_default=False)
_HandlerOpt: Optional[str] = option("--handler", help="Your handler as module:function; leave out to use the built-in image classifier.", show_default=False)
_ExtraFilesOpt: Optional[List[str]] = typer.Option(
    None, "--extra-files", help="More files or folders to include (comma list, may repeat).", show_default=False,
    metavar="PATHS")
_SynsetOpt: Optional[Path] = typer.Option(
    None, "--synset", help="Labels file (one class per line), stored as synset.txt.", show_default=False,
    metavar="FILE")
_RuntimeOpt: str = option("--runtime", "python", help="python, python2 or python3.")
_ExportPathOpt: Optional[Path] = typer.Option(
    None, "--export-path", help="Where to write the archive (default: current folder).", show_default=False,
    metavar="DIR")
_FormatOpt: str = typer.Option(
    "default", "--archive-format", help="default (.mar), tgz (.tar.gz) or no-archive (a folder).",
    metavar="[default|tgz|no-archive]")
_DescriptionOpt: Optional[str] = typer.Option(
    None, "--description", help="Model description.", show_default=False, metavar="WORDS")
_VersionOpt: str = option("--model-version", "1.0", help="Model version written to the manifest.")

#: How `archive create` names the arguments of create_archive / import_onnx, and its fixes.
_CREATE_WORDS = CommandWords(
    flags={"model_path": "--model-path", "handler": "--handler", "extra_files": "--extra-files",
           "synset": "--synset", "export_path": "--export-path"},
    hints=(
        (AlreadyExistsError, "use --force to overwrite it"),
        (NoCheckpointError, "export a checkpoint with HybridBlock.export() or Module.save_checkpoint(), "
                            "or pass --handler for a folder with your own handler"),
    ),
)
_EXTRACT_WORDS = CommandWords(hints=((AlreadyExistsError, "use --force to replace it"),))


@archive_app.command("create")
def create(
    model_dir: Optional[Path] = _ModelDirArg,
    model_path: Optional[Path] = _ModelPathOpt,
    from_onnx: Optional[Path] = _FromOnnxOpt,
    model_name: Optional[str] = _ModelNameOpt,
    handler: Optional[str] = _HandlerOpt,
    extra_files: Optional[List[str]] = _ExtraFilesOpt,
    synset: Optional[Path] = _SynsetOpt,
    runtime: str = _RuntimeOpt,
    export_path: Optional[Path] = _ExportPathOpt,
    archive_format: str = _FormatOpt,
    force: bool = option("--force", False, help="Overwrite an existing archive."),
    description: Optional[str] = _DescriptionOpt,
    model_version: str = _VersionOpt,
    output: str = output_option("json", "yaml", default="", help="Print the result as json or yaml (default: a line).",
                                show_default=False),
) -> None:
    """Package a model as an MMS model archive (model-archiver 1.0 compatible).

    Examples:

      mmsctl archive create ./squeezenet_v1.1 --model-name squeezenet

      mmsctl archive create --from-onnx SqueezeNet.onnx --synset synset.txt -n squeezenet

      mmsctl archive create ./my_model --handler my_service:handle --extra-files vocab.txt
    """
    if output:
        check_output(output, ("json", "yaml"))
    folder = _model_folder(model_dir, model_path, from_onnx)
    options: dict[str, Any] = dict(
        handler=handler, extra_files=_split(extra_files), runtime=runtime, export_path=export_path,
        archive_format=archive_format, force=force, description=description, model_version=model_version,
    )
    with _CREATE_WORDS.applied():
        if from_onnx is not None:
            result = _create_from_onnx(from_onnx, model_name, synset, options)
        else:
            from mmsctl.archive import create_archive

            assert folder is not None
            result = create_archive(folder, model_name=model_name, synset=synset, **options)
    _show_created(result, output)


def _model_folder(
    model_dir: Optional[Path], model_path: Optional[Path], from_onnx: Optional[Path]
) -> Optional[Path]:
    """The one model folder given (argument or --model-path); None with --from-onnx."""
    from mmsctl.errors import UsageError

    if model_dir is not None and model_path is not None and model_dir != model_path:
        raise UsageError("give the model folder once: as an argument or with --model-path, not both")
    folder = model_dir or model_path
    if from_onnx is not None:
        if folder is not None:
            raise UsageError("--from-onnx and a model folder cannot be used together")
        return None
    if folder is None:
        raise UsageError("no model given", hint="mmsctl archive create MODEL_DIR  (or --from-onnx FILE.onnx)")
    if folder.is_file() and folder.suffix.lower() == ".onnx":
        raise UsageError(f"{folder}: not a folder (--model-path takes the folder with the model files)",
                         hint="use --from-onnx for an ONNX file")
    return folder


def _show_created(result: Any, output: str) -> None:
    ui = get_ui()
    for warning in result.warnings:
        ui.warn(warning)
    if output:
        render_data(result.to_dict(), output)
        return
    ui.message(
        f"created {result.path.name}: model {result.manifest.model_name}, handler {result.manifest.handler}, "
        f"{len(result.files)} files, {human_size(result.size)}"
    )
    ui.out.file.write(f"{result.path}\n")
    ui.out.file.flush()


def _create_from_onnx(onnx_file: Path, model_name: Optional[str], synset: Optional[Path], kwargs: dict[str, Any]) -> Any:
    import tempfile

    from mmsctl.archive import check_model_name, create_archive
    from mmsctl.archive.onnx_import import import_onnx
    from mmsctl.errors import InputNotFoundError, UsageError

    if not onnx_file.is_file():
        raise InputNotFoundError(f"{onnx_file}: no such file (--from-onnx)")
    if kwargs.get("handler"):
        raise UsageError("--from-onnx uses the built-in vision handler; --handler cannot be combined with it")
    name = check_model_name(model_name or onnx_file.name.rsplit(".", 1)[0])
    get_ui().message(f"importing {onnx_file.name} (ONNX) into MXNet ...")
    with tempfile.TemporaryDirectory(prefix="mmsctl-onnx-") as tmp:
        imported = import_onnx(onnx_file, Path(tmp) / name, prefix=name, synset=synset)
        return create_archive(imported.folder, model_name=name, **kwargs)


@archive_app.command("inspect")
def inspect(
    archive: Path = typer.Argument(
        ..., help="A .mar, .model, .tar.gz or model folder.", show_default=False, metavar="ARCHIVE"
    ),
    output: str = OutputOpt,
) -> None:
    """Show an archive's manifest, handler, signature and files (nothing is extracted)."""
    from mmsctl.archive import describe_archive

    check_output(output)
    info = describe_archive(archive)
    data = info.to_dict()
    if render_data(data, output):
        return
    ui = get_ui()
    sig = info.signature or {}
    inputs = sig.get("inputs") if isinstance(sig, dict) else None
    sig_text = (
        ", ".join(f"{i.get('data_name')} {i.get('data_shape')}" for i in inputs if isinstance(i, dict))
        if isinstance(inputs, list)
        else "-"
    )
    rows = [
        ("Name", info.manifest.model_name),
        ("Version", info.manifest.model_version or "-"),
        ("Handler", info.manifest.handler or "- (none: the built-in handler is used)"),
        ("Runtime", info.manifest.runtime),
        ("Engine", info.manifest.engine_name or "-"),
        ("Description", info.manifest.description or "-"),
        ("Format", f"{data['format']}{' (legacy MMS 0.x)' if info.manifest.legacy else ''}"
         f"{'' if info.has_manifest else ', no manifest'}"),
        ("Size", f"{human_size(info.size)} ({human_size(info.total_size)} uncompressed, {len(info.files)} files)"),
        ("Signature", sig_text or "-"),
        ("Source", str(info.source)),
    ]
    if output == "wide":
        m = info.manifest
        rows.insert(5, ("Versions", f"spec {m.specification_version or '-'}, impl {m.implementation_version or '-'}, "
                                    f"server {m.model_server_version or '-'}"))
    out = ui.out.file
    for key, value in rows:
        out.write(f"{key + ':':<13}{value}\n")
    out.write("\n")
    out.flush()
    render_table(
        [{"path": f.path, "size": human_size(f.size), "bytes": f.size} for f in info.files],
        _FILE_COLUMNS,
        wide=output == "wide",
    )


@archive_app.command("extract")
def extract(
    archive: Path = typer.Argument(..., help="A .mar, .model or .tar.gz file.", show_default=False, metavar="ARCHIVE"),
    dest: Optional[Path] = typer.Argument(
        None, help="Target folder (default: ./NAME, named after the archive).", show_default=False, metavar="DEST"
    ),
    force: bool = option("--force", False, help="Replace the target folder if it exists."),
) -> None:
    """Extract an archive safely (no zip-slip, links, devices or zip bombs); MAR-INF/ lands at the top."""
    from mmsctl.archive import extract_archive

    with _EXTRACT_WORDS.applied():
        result = extract_archive(archive, dest, force=force)
    files = result.files()
    get_ui().message(f"extracted {len(files)} files of {result.model_name} into {result.root}")
    out = get_ui().out.file
    out.write(f"{result.root}\n")
    out.flush()


def register(app: typer.Typer) -> None:
    app.add_typer(archive_app, name="archive")
