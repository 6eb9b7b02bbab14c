"""What it takes to load a model: one picklable description, the same for every way a model runs.

``mmsctl predict`` (in its own process or in a pool of worker processes) and the
server's workers all hand :func:`~mmsctl.engine.service.load_service` a
:class:`ServiceSpec`. It holds plain values only, so it is pickled as it is to a
worker process. Opened archives make one with
:meth:`mmsctl.archive.ModelArchive.service_spec`; a bare checkpoint folder needs
only ``ServiceSpec(root, name)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["ServiceSpec"]


@dataclass(frozen=True)
class ServiceSpec:
    """A model folder and how to start its handler.

    Attributes:
        root: the extracted archive (or checkpoint) folder.
        model_name: the name requests use (``context.model_name``).
        handler: the archive's handler (``module[:function]``), looked up inside *root*;
            None: the built-in image classifier, for an MXNet checkpoint.
        handler_override: a handler the user chose instead (``--handler``): a module of
            the archive or a ``.py`` file anywhere; it also turns off the legacy loader.
        legacy: an MMS 0.4 ``.model`` archive (its service class is built the 0.4 way).
        manifest: the manifest as a dict, for a folder that has no manifest file
            (the file on disk wins where there is one).
        batch_size: the most requests per batch (``context.system_properties["batch_size"]``).
        gpu_id: run on this GPU; None: the CPU.
        decode_input: JSON and text bodies reach the handler parsed (MMS's ``decode_input_request``);
            False: every body as a ``bytearray``.
    """

    root: Path
    model_name: str
    handler: Optional[str] = None
    handler_override: Optional[str] = None
    legacy: bool = False
    manifest: Optional[dict[str, Any]] = field(default=None, hash=False)
    batch_size: int = 1
    gpu_id: Optional[int] = None
    decode_input: bool = True

    @property
    def chosen_handler(self) -> Optional[str]:
        """The handler that will be started: the override, else the archive's."""
        return self.handler_override or self.handler
