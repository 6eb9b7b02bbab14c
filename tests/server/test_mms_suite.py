"""MMS 1.1.11's own server test suite (ModelServerTest.java), replayed over HTTP against ``mmsctl serve``.

The same requests, in the same order, on the same model store and config.properties as MMS's test
(tests/support/mms_suite.py); each case checks what the Java test checks. Cases marked ``kept`` are the
differences kept on purpose (docs/server.md): there mmsctl's own answer is checked. The same replay runs
against real MMS 1.1.11 in tests/interop/test_mms_suite_vs_mms.py.
"""

from __future__ import annotations

import re
from typing import Optional

import pytest

from tests.support.mms_suite import replay_mmsctl
from tests.support.mms_suite_cases import CASES
from tests.support.paths import REPO

pytestmark = [pytest.mark.slow]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Optional[str]]:
    """Every case's failure (None: passed), from one replay of the whole suite."""
    return replay_mmsctl(CASES, tmp_path_factory.mktemp("mms-suite"))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_mmsctl_passes_mms_case(results: dict[str, Optional[str]], case) -> None:
    assert case.name in results, f"{case.name} did not run"
    assert results[case.name] is None, f"{case.name}{' (kept: ' + case.kept + ')' if case.kept else ''}: " \
                                       f"{results[case.name]}"


def test_every_kept_difference_is_documented_in_server_md() -> None:
    """Each case where mmsctl answers differently on purpose is named in docs/server.md's table of differences."""
    docs = (REPO / "docs" / "server.md").read_text()
    table = docs[docs.index("## Differences from MMS 1.1.11, on purpose"):]
    for case in (c for c in CASES if c.kept):
        assert re.search(re.escape(case.name.split("(")[0]) + r"\b", table), f"{case.name} ({case.kept})"
