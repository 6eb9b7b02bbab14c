"""MMS 0.4 ``.model`` archives: a root ``MANIFEST.json`` with a ``Model`` section.

Such a manifest looks like::

    {"Engine": {"MXNet": 1.2}, "Model-Archive-Version": 0.2, "Model-Server": 0.4,
     "Model-Archive-Description": "...", "License": "...",
     "Model": {"Model-Name": "squeezenet_v1.1", "Description": "...",
               "Symbol": "squeezenet_v1.1-symbol.json", "Parameters": "squeezenet_v1.1-0000.params",
               "Signature": "signature.json", "Service": "mxnet_vision_service.py",
               "Model-Format": "MXNet-Symbolic"},
     "Created-By": {"Author": "...", "Author-Email": "..."}}

We translate it the way MMS 1.x does when it loads one (``LegacyManifest.migrate``):
the service file becomes the handler and the model version is ``snapshot``. This module
only maps fields; :func:`mmsctl.archive.manifest.parse_manifest` builds the ``Manifest``.
"""

from __future__ import annotations

from typing import Any

from mmsctl.errors import ArchiveError

__all__ = ["LEGACY_MANIFEST_NAME", "legacy_fields"]

LEGACY_MANIFEST_NAME = "MANIFEST.json"


def _handler(service: Any) -> str | None:
    """``mxnet_vision_service.py`` -> ``mxnet_vision_service`` (a module whose class is the service)."""
    if not service:
        return None
    text = str(service)
    return text[:-3] if text.endswith(".py") else text


def legacy_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The :class:`~mmsctl.archive.manifest.Manifest` fields of a legacy (MMS 0.4) manifest.

    Raises:
        ArchiveError: no ``Model`` section or no model name.
    """
    model = data.get("Model")
    if not isinstance(model, dict):
        raise ArchiveError("legacy MANIFEST.json has no 'Model' section")
    name = model.get("Model-Name")
    if not name:
        raise ArchiveError("legacy MANIFEST.json has no model name (Model.Model-Name)")
    engine_raw = data.get("Engine")
    engine = None
    if isinstance(engine_raw, dict) and engine_raw:
        engine_name, engine_version = next(iter(engine_raw.items()))
        engine = {"engineName": str(engine_name), "engineVersion": str(engine_version)}
    created = data.get("Created-By")
    publisher = None
    if isinstance(created, dict):
        publisher = {"author": created.get("Author"), "email": created.get("Author-Email")}
    return dict(
        model_name=str(name),
        handler=_handler(model.get("Service")),
        runtime="python",
        engine=engine,
        description=model.get("Description"),
        model_version="snapshot",
        publisher=publisher,
        license=data.get("License"),
        archive_description=data.get("Model-Archive-Description"),
        model_server_version=str(data["Model-Server"]) if "Model-Server" in data else None,
        implementation_version=str(data["Model-Archive-Version"]) if "Model-Archive-Version" in data else None,
        specification_version=None,
        legacy=True,
        legacy_model=dict(model),
    )
