"""Handlers that ship with mmsctl and are copied into archives that use them.

Each is a standalone file (it imports only mxnet and numpy, never mmsctl) so that
an archive made by ``mmsctl archive create`` also loads and serves in real MMS.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["VISION_HANDLER", "VISION_HANDLER_FILE", "VISION_HANDLER_MODULE"]

#: The built-in MXNet image-classification service (same pre/post-processing as MMS's).
VISION_HANDLER_FILE = Path(__file__).with_name("vision_service.py")
#: The module name it gets inside an archive.
VISION_HANDLER_MODULE = "mmsctl_vision_service"
#: The manifest ``handler`` value for it.
VISION_HANDLER = f"{VISION_HANDLER_MODULE}:handle"
