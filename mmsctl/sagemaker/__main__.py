"""``python -m mmsctl.sagemaker serve``: what ``docker run IMAGE serve`` runs in the image (its ENTRYPOINT)."""

import sys

from mmsctl.sagemaker.serve import main

sys.exit(main(sys.argv[1:]))
