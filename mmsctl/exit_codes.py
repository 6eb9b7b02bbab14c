"""Named exit codes (documented in docs/cli.md): the number each error carries and the CLI returns.

They sit below ``errors.py`` (every ``MmsError`` has one), so the core never imports the CLI.
"""

from __future__ import annotations

SUCCESS = 0
ERROR = 1
USAGE = 2
NOT_FOUND = 3
PARTIAL_FAILURE = 4
UNREACHABLE = 5
AUTH_FAILED = 6
TIMEOUT = 7
SERVER_ERROR = 8
CLOUD_ERROR = 9
INTERRUPTED = 130
