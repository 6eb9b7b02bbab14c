"""``mms.context``: the context a handler receives (mmsctl's own, which has MMS's surface)."""

from mmsctl.engine.context import Context, RequestProcessor

__all__ = ["Context", "RequestProcessor"]
