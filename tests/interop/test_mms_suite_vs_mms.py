"""MMS 1.1.11's own server test suite (ModelServerTest.java), replayed against real MMS 1.1.11.

The replay of tests/server/test_mms_suite.py (the same cases, model store and config.properties) against
the server it was written from: a behaviour mmsctl copies is checked against MMS itself, including our
equivalents of MMS's test models, and each kept difference's MMS side. It starts its own MMS servers with the
suite's helpers (``running_mms``) rather than the test process's shared one: the suite needs MMS's test
config (its start-up models, no ``default_workers_per_model``) and two variants of it.
"""

from __future__ import annotations

from typing import Optional

import pytest

from tests.support.mms import mms_skip_reason
from tests.support.mms_suite import replay_mms
from tests.support.mms_suite_cases import CASES

pytestmark = [pytest.mark.interop, pytest.mark.slow]


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Optional[str]]:
    reason = mms_skip_reason()
    if reason:
        pytest.skip(reason)
    return replay_mms(CASES, tmp_path_factory.mktemp("mms-suite-mms"))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_mms_passes_its_own_case(results: dict[str, Optional[str]], case) -> None:
    assert case.name in results, f"{case.name} did not run"
    assert results[case.name] is None, f"{case.name}: {results[case.name]}"
