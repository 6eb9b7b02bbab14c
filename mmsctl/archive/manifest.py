"""The archive manifest: MMS model-archiver 1.0's ``MAR-INF/MANIFEST.json``, as a dataclass.

The JSON layout is the one ``model-archiver`` 1.0 writes and MMS 1.x reads::

    {"runtime": "python",
     "model": {"modelName": "...", "handler": "module:function",
               "description": "...", "modelVersion": "1.0", "extensions": {...}},
     "engine": {"engineName": "MXNet", "engineVersion": "..."},
     "license": "...", "description": "...", "publisher": {"author": "...", "email": "..."},
     "modelServerVersion": "1.0", "implementationVersion": "1.0", "specificationVersion": "1.0",
     "userData": {...}}

Keys we do not know are kept (``extra``) so that a round trip loses nothing.
Legacy MMS 0.4 manifests are turned into this form by :mod:`mmsctl.archive.legacy`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional

from mmsctl.archive.legacy import legacy_fields
from mmsctl.errors import ArchiveError, UsageError
from mmsctl.names import MODEL_NAME_PATTERN

__all__ = [
    "MANIFEST_DIR",
    "MANIFEST_NAME",
    "MANIFEST_PATH",
    "MODEL_NAME_PATTERN",
    "RUNTIMES",
    "Manifest",
    "check_model_name",
    "parse_manifest",
]

MANIFEST_DIR = "MAR-INF"
MANIFEST_NAME = "MANIFEST.json"
MANIFEST_PATH = f"{MANIFEST_DIR}/{MANIFEST_NAME}"
#: ``--runtime`` values, as in model-archiver's RuntimeType.
RUNTIMES = ("python", "python2", "python3")

_SPEC_VERSION = "1.0"

_TOP_KEYS = {
    "runtime",
    "model",
    "engine",
    "license",
    "description",
    "publisher",
    "modelServerVersion",
    "implementationVersion",
    "specificationVersion",
    "userData",
}
_MODEL_KEYS = {"modelName", "handler", "description", "modelVersion", "extensions"}


def check_model_name(name: str) -> str:
    """Refuse a model name that model-archiver and MMS would refuse."""
    if not MODEL_NAME_PATTERN.match(name or ""):
        raise UsageError(
            f"invalid model name {name!r}: use letters, digits, '_', '-' and '.', "
            "starting with a letter or digit"
        )
    return name


def _str(value: Any) -> Optional[str]:
    """Manifest versions are strings; legacy archives wrote numbers (0.4)."""
    if value is None:
        return None
    return str(value)


@dataclass
class Manifest:
    """What a model archive says about itself.

    ``legacy`` is True for an MMS 0.4 ``.model`` archive whose manifest was
    translated; ``legacy_model`` then keeps its ``Model`` section (``Symbol``,
    ``Parameters``, ``Signature``, ``Service``), which MMS's legacy services read.
    """

    model_name: str
    handler: Optional[str] = None
    runtime: str = "python"
    engine: Optional[dict[str, Any]] = None
    description: Optional[str] = None
    model_version: Optional[str] = None
    publisher: Optional[dict[str, Any]] = None
    license: Optional[str] = None
    archive_description: Optional[str] = None
    model_server_version: Optional[str] = _SPEC_VERSION
    implementation_version: Optional[str] = _SPEC_VERSION
    specification_version: Optional[str] = _SPEC_VERSION
    extensions: Optional[dict[str, Any]] = None
    user_data: Optional[Any] = None
    legacy: bool = False
    legacy_model: Optional[dict[str, Any]] = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def engine_name(self) -> Optional[str]:
        if not self.engine:
            return None
        name = self.engine.get("engineName")
        return str(name) if name is not None else None

    @classmethod
    def from_dict(cls, data: Any) -> "Manifest":
        """Read the model-archiver 1.0 layout.

        Raises:
            ArchiveError: not an object, no ``model`` section or no ``modelName``.
        """
        if not isinstance(data, dict):
            raise ArchiveError("manifest is not a JSON object")
        model = data.get("model")
        if not isinstance(model, dict):
            raise ArchiveError("manifest has no 'model' section")
        name = model.get("modelName")
        if not isinstance(name, str) or not name:
            raise ArchiveError("manifest has no model name (model.modelName)")
        handler = model.get("handler")
        engine = data.get("engine")
        publisher = data.get("publisher")
        extra = {k: v for k, v in data.items() if k not in _TOP_KEYS}
        model_extra = {k: v for k, v in model.items() if k not in _MODEL_KEYS}
        if model_extra:
            extra["model"] = model_extra
        return cls(
            model_name=name,
            handler=str(handler) if handler else None,
            runtime=str(data.get("runtime") or "python"),
            engine=dict(engine) if isinstance(engine, dict) else None,
            description=_str(model.get("description")),
            model_version=_str(model.get("modelVersion")),
            publisher=dict(publisher) if isinstance(publisher, dict) else None,
            license=_str(data.get("license")),
            archive_description=_str(data.get("description")),
            model_server_version=_str(data.get("modelServerVersion")),
            implementation_version=_str(data.get("implementationVersion")),
            specification_version=_str(data.get("specificationVersion")),
            extensions=model.get("extensions") if isinstance(model.get("extensions"), dict) else None,
            user_data=data.get("userData"),
            extra=extra,
        )

    def to_dict(self) -> dict[str, Any]:
        """The model-archiver 1.0 layout (key order as model-archiver writes it)."""
        model: dict[str, Any] = {"modelName": self.model_name, "handler": self.handler}
        if self.description is not None:
            model["description"] = self.description
        if self.model_version is not None:
            model["modelVersion"] = self.model_version
        if self.extensions is not None:
            model["extensions"] = self.extensions
        model.update(self.extra.get("model", {}))
        out: dict[str, Any] = {"runtime": self.runtime, "model": model}
        if self.engine is not None:
            out["engine"] = self.engine
        if self.license is not None:
            out["license"] = self.license
        if self.model_server_version is not None:
            out["modelServerVersion"] = self.model_server_version
        if self.archive_description is not None:
            out["description"] = self.archive_description
        if self.implementation_version is not None:
            out["implementationVersion"] = self.implementation_version
        if self.specification_version is not None:
            out["specificationVersion"] = self.specification_version
        if self.user_data is not None:
            out["userData"] = self.user_data
        if self.publisher is not None:
            out["publisher"] = self.publisher
        out.update({k: v for k, v in self.extra.items() if k != "model"})
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"


def parse_manifest(raw: bytes, *, where: str = MANIFEST_PATH) -> Manifest:
    """Parse manifest bytes, new layout or legacy, into a :class:`Manifest`.

    Raises:
        ArchiveError: not UTF-8 JSON, or neither layout.
    """
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise ArchiveError(f"{where}: not valid JSON: {exc}") from exc
    if isinstance(data, dict) and "model" not in data and "Model" in data:
        return Manifest(**legacy_fields(data))
    try:
        return Manifest.from_dict(data)
    except ArchiveError as exc:
        raise ArchiveError(f"{where}: {exc.message}") from exc
