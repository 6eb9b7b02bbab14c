"""Bearer tokens for remote servers: the client's view of :mod:`mmsctl.tokens`.

Tokens are read from a token file named by the context (never stored in the
config); a TorchServe ``key_file.json`` gives each API its own key.
"""

from __future__ import annotations

from mmsctl.tokens import Api, read_token

__all__ = ["Api", "read_token"]
