"""``python -m mmsctl.server CONFIG_JSON``: the process ``mmsctl serve start`` runs."""

import sys

from mmsctl.server.app import main

sys.exit(main(sys.argv[1:]))
