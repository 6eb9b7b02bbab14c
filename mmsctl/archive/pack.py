"""Build model archives the way MMS's ``model-archiver`` 1.0 does, but reproducibly.

Two ways in:

* an MXNet checkpoint folder (``<prefix>-symbol.json``, ``<prefix>-NNNN.params``,
  ``signature.json``, optional ``synset.txt``) and no handler: the built-in
  vision handler is copied in as ``mmsctl_vision_service.py`` and the
  checkpoint is renamed ``<model-name>-symbol.json``/``<model-name>-0000.params``,
  the names MMS's MXNet services look for, so the archive serves in mmsctl and
  in real MMS without the user writing code;
* any folder plus ``handler="module:function"`` (and extra files): archived as
  it is, like ``model-archiver --model-path DIR --handler …``.

Output formats are model-archiver's: ``default`` (``<name>.mar``, a zip),
``tgz`` (``<name>.tar.gz``, files under ``<name>/``) and ``no-archive`` (a
folder ``<name>/``), written by :mod:`mmsctl.archive.write`: deterministic (the same
inputs give the same bytes) and renamed into place only when complete.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Sequence

from mmsctl.archive.manifest import MANIFEST_NAME, MANIFEST_PATH, RUNTIMES, Manifest, check_model_name
from mmsctl.archive.model_archive import ArchiveFile
from mmsctl.archive.write import write_archive
from mmsctl.errors import AlreadyExistsError, ArchiveError, InputNotFoundError, NoCheckpointError, UsageError

__all__ = [
    "ARCHIVE_FORMATS",
    "CreatedArchive",
    "Checkpoint",
    "create_archive",
    "find_checkpoint",
    "output_path",
]

#: ``--archive-format`` value -> file name suffix (as in model-archiver).
ARCHIVE_FORMATS: dict[str, str] = {"default": ".mar", "tgz": ".tar.gz", "no-archive": ""}

_UNWANTED_DIRS = {"__MACOSX", "__pycache__"}
_UNWANTED_SUFFIXES = (".pyc", ".DS_Store", ".mar")
_PARAMS_RE = re.compile(r"^(?P<prefix>.+)-(?P<epoch>\d{4})\.params$")


@dataclass(frozen=True)
class Checkpoint:
    """An MXNet checkpoint found in a folder."""

    prefix: str
    symbol: Path
    params: Path
    epoch: int


@dataclass
class CreatedArchive:
    """What ``create_archive`` wrote."""

    path: Path
    format: str
    manifest: Manifest
    files: list[ArchiveFile]
    size: int
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "format": self.format,
            "model_name": self.manifest.model_name,
            "handler": self.manifest.handler,
            "size": self.size,
            "files": [{"path": f.path, "size": f.size} for f in self.files],
            "manifest": self.manifest.to_dict(),
            "warnings": self.warnings,
        }


def output_path(export_path: Path, model_name: str, archive_format: str) -> Path:
    return export_path / f"{model_name}{ARCHIVE_FORMATS[archive_format]}"


def find_checkpoint(folder: Path) -> Checkpoint:
    """The one ``*-symbol.json`` in *folder* and its latest ``-NNNN.params``.

    Raises:
        ArchiveError: no symbol file, several, or no matching params file.
    """
    symbols = sorted(p for p in folder.glob("*-symbol.json") if p.is_file())
    if not symbols:
        raise NoCheckpointError(
            f"{folder}: no MXNet symbol file (*-symbol.json)",
            hint="export a checkpoint with HybridBlock.export() or Module.save_checkpoint(), "
            "or give a handler for a folder with your own handler",
        )
    if len(symbols) > 1:
        names = ", ".join(p.name for p in symbols)
        raise ArchiveError(f"{folder}: more than one symbol file ({names}); keep one checkpoint per folder")
    prefix = symbols[0].name[: -len("-symbol.json")]
    params = []
    for p in folder.glob(f"{_glob_escape(prefix)}-*.params"):
        m = _PARAMS_RE.match(p.name)
        if m and m.group("prefix") == prefix and p.is_file():
            params.append((int(m.group("epoch")), p))
    if not params:
        raise ArchiveError(f"{folder}: no parameters file {prefix}-NNNN.params beside {symbols[0].name}")
    epoch, path = max(params)
    return Checkpoint(prefix, symbols[0], path, epoch)


def _glob_escape(text: str) -> str:
    import glob

    return glob.escape(text)


def _check_signature(path: Path) -> None:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ArchiveError(
            f"{path.parent}: no signature.json (the input name and shape the vision handler needs)",
            hint='write one like {"inputs": [{"data_name": "data", "data_shape": [0, 3, 224, 224]}]}',
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ArchiveError(f"{path}: not valid JSON: {exc}") from exc
    inputs = data.get("inputs") if isinstance(data, dict) else None
    if not isinstance(inputs, list) or not inputs or not all(
        isinstance(i, dict) and "data_name" in i and "data_shape" in i for i in inputs
    ):
        raise ArchiveError(f"{path}: expected {{\"inputs\": [{{\"data_name\": …, \"data_shape\": […]}}]}}")


def _walk(folder: Path, skip: set[Path]) -> dict[str, Path]:
    """Files under *folder* by archive name, filtered like model-archiver (no hidden dirs, caches, .mar)."""
    found: dict[str, Path] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _UNWANTED_DIRS and not d.startswith("."))
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith(_UNWANTED_SUFFIXES) or path.resolve() in skip:
                continue
            rel = path.relative_to(folder).as_posix()
            if rel in (MANIFEST_NAME, MANIFEST_PATH):
                continue  # an old manifest: ours replaces it
            if not path.is_file():
                continue  # sockets, fifos, dangling links
            found[rel] = path
    return found


def _add(files: dict[str, Path], name: str, path: Path) -> None:
    if name in files and files[name].resolve() != path.resolve():
        raise ArchiveError(f"two files would be stored as {name!r}: {files[name]} and {path}")
    files[name] = path


def _extra(files: dict[str, Path], extra_files: Sequence[Path], skip: set[Path]) -> None:
    for extra in extra_files:
        extra = Path(extra).expanduser()
        if not extra.exists():
            raise InputNotFoundError(f"{extra}: no such file or folder", param="extra_files")
        if extra.is_dir():
            for rel, path in _walk(extra, skip).items():
                _add(files, f"{extra.resolve().name}/{rel}", path)
        else:
            _add(files, extra.name, extra)


def _handler_module(handler: str) -> str:
    """The module MMS imports for *handler* (``dir/mod.py:fn`` -> ``mod``)."""
    module = handler.split(":", 1)[0]
    if module.endswith(".py"):
        module = module[:-3]
    return module.split("/")[-1]


def create_archive(
    model_path: Path | str,
    *,
    model_name: Optional[str] = None,
    handler: Optional[str] = None,
    extra_files: Sequence[Path] = (),
    synset: Optional[Path] = None,
    runtime: str = "python",
    export_path: Optional[Path] = None,
    archive_format: str = "default",
    force: bool = False,
    description: Optional[str] = None,
    model_version: Optional[str] = "1.0",
) -> CreatedArchive:
    """Archive a model folder as ``.mar``, ``.tar.gz`` or a ``no-archive`` folder.

    Args:
        model_path: the folder with the model files (model-archiver's ``--model-path``).
        model_name: default: the folder's name.
        handler: ``module:function`` of your own handler; None uses the built-in
            vision handler (the folder must then hold an MXNet checkpoint and signature.json).
        extra_files: more files or folders to put in the archive.
        synset: a labels file, stored as ``synset.txt``.
        runtime: ``python``, ``python2`` or ``python3``.
        export_path: where the archive goes (default: the current folder; created if missing).
        archive_format: ``default`` (.mar), ``tgz`` or ``no-archive``.
        force: replace an existing output.
        description, model_version: written into the manifest.

    Returns:
        The output's path, manifest and file list, and warnings worth showing.

    Raises:
        InputNotFoundError: *model_path* or an extra file is missing.
        UsageError: a bad name, format or runtime.
        ArchiveError: no checkpoint for the built-in handler, output exists without *force*.

    Example:
        >>> create_archive(Path("squeezenet_v1.1"), model_name="squeezenet", export_path=Path("store"))
    """
    folder, name, out = _checked_target(model_path, model_name, handler, runtime, export_path,
                                        archive_format, force)
    files, handler, engine, warnings = _model_files(folder, name, handler, {out}, extra_files, synset)
    manifest = Manifest(model_name=name, handler=handler, runtime=runtime, engine=engine,
                        description=description, model_version=model_version)
    payload = manifest.to_json().encode("utf-8")
    write_archive(out, archive_format, files, payload, name)
    listing = [ArchiveFile(n, files[n].stat().st_size) for n in files] + [ArchiveFile(MANIFEST_PATH, len(payload))]
    size = out.stat().st_size if out.is_file() else sum(f.size for f in listing)
    return CreatedArchive(path=out, format=archive_format, manifest=manifest,
                          files=sorted(listing, key=lambda f: f.path), size=size, warnings=warnings)


def _checked_target(
    model_path: Path | str, model_name: Optional[str], handler: Optional[str], runtime: str,
    export_path: Optional[Path], archive_format: str, force: bool,
) -> tuple[Path, str, Path]:
    """Check the arguments before anything is read: the model folder, the model name, the output."""
    folder = Path(model_path).expanduser()
    if not folder.exists():
        raise InputNotFoundError(f"{folder}: no such folder")
    if not folder.is_dir():
        hint = "import it first (mmsctl.archive.import_onnx)" if folder.suffix.lower() == ".onnx" else None
        raise UsageError(f"{folder}: not a folder (give the folder with the model files)", hint=hint,
                         param="model_path")
    folder = folder.resolve()
    name = check_model_name(model_name or folder.name)
    if archive_format not in ARCHIVE_FORMATS:
        raise UsageError(
            f"unknown archive format {archive_format!r}; choose one of: {', '.join(ARCHIVE_FORMATS)}"
        )
    if runtime not in RUNTIMES:
        raise UsageError(f"unknown runtime {runtime!r}; choose one of: {', '.join(RUNTIMES)}")
    if handler is not None and not handler.strip():
        raise UsageError("the handler is empty; give module:function or leave it out for the built-in handler",
                         param="handler")
    export = Path(export_path).expanduser() if export_path is not None else Path.cwd()
    if export.exists() and not export.is_dir():
        raise UsageError(f"{export}: not a folder", param="export_path")
    export.mkdir(parents=True, exist_ok=True)
    out = output_path(export.resolve(), name, archive_format)
    if out.exists() or out.is_symlink():
        if not force:
            raise AlreadyExistsError(f"{out} already exists", hint="pass force=True to overwrite it")
        if archive_format == "no-archive" and not out.is_dir():
            raise ArchiveError(f"{out} exists and is not a folder; remove it first")
    return folder, name, out


def _model_files(
    folder: Path, name: str, handler: Optional[str], skip: set[Path], extra_files: Sequence[Path],
    synset: Optional[Path],
) -> tuple[dict[str, Path], str, Optional[dict[str, str]], list[str]]:
    """What goes into the archive (name -> file), the handler, the manifest's engine, warnings."""
    if handler is None:
        from mmsctl.engine.builtin import VISION_HANDLER

        files, engine, warnings = _builtin_handler_files(folder, name, skip, with_synset=synset is not None)
        handler = VISION_HANDLER
    else:
        files, engine, warnings = _walk(folder, skip), None, []
        if any(n.endswith("-symbol.json") for n in files):
            engine = {"engineName": "MXNet"}
    _extra(files, extra_files, skip)
    if synset is not None:
        synset = Path(synset).expanduser()
        if not synset.is_file():
            raise InputNotFoundError(f"{synset}: no such file", param="synset")
        files["synset.txt"] = synset
    module = _handler_module(handler)
    if "." not in module and f"{module}.py" not in files and f"{module}/__init__.py" not in files:
        warnings.append(
            f"handler module {module}.py is not in the archive; "
            "it must be importable where the model is served"
        )
    return files, handler, engine, warnings


def _builtin_handler_files(
    folder: Path, name: str, skip: set[Path], *, with_synset: bool
) -> tuple[dict[str, Path], dict[str, str], list[str]]:
    """A checkpoint folder's files for the built-in handler: the checkpoint under the model's
    name, the handler itself, the engine entry and any warnings."""
    from mmsctl.engine.builtin import VISION_HANDLER_FILE, VISION_HANDLER_MODULE

    ckpt = find_checkpoint(folder)
    _check_signature(folder / "signature.json")
    other_params = {p.resolve() for p in folder.glob(f"{_glob_escape(ckpt.prefix)}-*.params")}
    files = _walk(folder, skip | other_params)
    files.pop(ckpt.symbol.name, None)
    files[f"{name}-symbol.json"] = ckpt.symbol
    files[f"{name}-0000.params"] = ckpt.params
    if not VISION_HANDLER_FILE.is_file():
        raise ArchiveError(f"the built-in vision handler is missing from this install ({VISION_HANDLER_FILE})")
    files[f"{VISION_HANDLER_MODULE}.py"] = VISION_HANDLER_FILE
    warnings = []
    if "synset.txt" not in files and not with_synset:
        warnings.append("no synset.txt: predictions will show class numbers, not labels")
    return files, {"engineName": "MXNet"}, warnings
