#!/usr/bin/env python3
"""Download the wheels the boot-script test installs an instance from (set-up, with the package index).

`make test` runs this before the tests, as it installs the reference servers: every runtime
dependency of mmsctl as a binary wheel for this machine's Python and platform, into
~/.cache/mmsctl-test-wheelhouse (kept between runs). The test itself then runs with no index at
all and builds only this checkout's own wheel, offline (tests/support/boot_run.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.boot_run import download_test_dependencies  # noqa: E402

if __name__ == "__main__":
    print(f"boot-test wheels: {download_test_dependencies()}")
