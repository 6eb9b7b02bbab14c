"""The build-time step of the image (``RUN python -m mmsctl.lambda_.prepare``).

It imports mxnet once (and with it mmsctl's modules, whose bytecode lands in the image), and, for a
baked model, loads it once, so an image that cannot serve fails to build instead of failing in Lambda.
"""

from __future__ import annotations

import sys
import time

__all__ = ["main"]


def main() -> int:
    from mmsctl.engine.mxnet_compat import import_mxnet
    from mmsctl.errors import MmsError
    from mmsctl.lambda_.settings import HandlerSettings

    start = time.perf_counter()
    try:
        import_mxnet()
        settings = HandlerSettings.from_environ()
        if not settings.model_from_s3:
            from mmsctl.lambda_.served_model import load_model

            load_model(settings).close()
    except MmsError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 1
    print(f"mmsctl: image prepared in {time.perf_counter() - start:.1f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
