"""``python -m mmsctl.engine.worker FD``: one worker process (:func:`mmsctl.engine.worker.child.main`)."""

import sys

from mmsctl.engine.worker.child import main

if __name__ == "__main__":
    main(sys.argv[1:])
