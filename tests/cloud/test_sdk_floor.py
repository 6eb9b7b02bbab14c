"""The boto3/botocore floor pyproject.toml names, and the checks that keep it honest.

`make test-lowest` runs the AWS tests with boto3 and botocore at exactly the floor (scripts/lowest_venv.py).
botocore validates a request's parameters in the client, so a parameter the floor's models lack fails there for
every call sent to moto; tests/support/planned_calls.py does the same for the calls a dry run only lists.
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

import pytest

from mmsctl.cloud.aws.session import AwsSession
from tests.support.planned_calls import planned_call_errors, problems
from tests.support.scripts import load_script

lowest_venv = load_script("lowest_venv")

#: Set by `make test-lowest` (read at import: each test's environment is cleaned of MMSCTL_*).
AT_THE_FLOOR = os.environ.get("MMSCTL_TEST_SDK_FLOOR") == "1"


def _version(dist: str) -> tuple[int, ...]:
    return tuple(int(part) for part in importlib.metadata.version(dist).split(".")[:3])


def test_this_run_uses_the_sdk_pyproject_allows() -> None:
    floor = tuple(int(part) for part in lowest_venv.sdk_floor().split("."))
    for dist in ("boto3", "botocore"):
        if AT_THE_FLOOR:
            assert _version(dist) == floor, f"make test-lowest must run at the floor, not {dist} {_version(dist)}"
        else:
            assert _version(dist) >= floor


def test_the_floor_has_the_newest_parameter_mmsctl_sends() -> None:
    """AddPermission's InvokedViaFunctionUrl (`lambda deploy --public`'s second grant) came in botocore 1.40.50."""
    grant = {"FunctionName": "kitten", "StatementId": "mmsctl-url-invoke", "Action": "lambda:InvokeFunction",
             "Principal": "*", "InvokedViaFunctionUrl": True}
    assert problems("lambda", "add_permission", grant) == ""
    assert "Unknown parameter in input" in problems("lambda", "add_permission", {**grant, "InvokedViaUrl": True})


def test_a_dry_run_call_botocore_would_refuse_fails_the_test_that_planned_it() -> None:
    plan = AwsSession(None, "<region>", unlooked="no AWS region or credentials")
    plan.call("lambda", "add_permission", FunctionName="kitten", StatementId="s", Action="lambda:InvokeFunction",
              Principal="*", FunctionUrlAuth="NONE")
    plan.call("ec2", "describe_vpcs", Filters=[{"Name": "is-default", "Values": ["true"]}])
    found = planned_call_errors()
    assert len(found) == 1 and found[0].startswith("lambda add_permission:") and "FunctionUrlAuth" in found[0]


def test_the_floor_is_one_version_for_boto3_and_botocore(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\ndependencies = ["boto3>=1.40.50", "botocore>=1.40.49"]\n')
    with pytest.raises(SystemExit, match="one floor for boto3 and botocore"):
        lowest_venv.sdk_floor(pyproject)
    pyproject.write_text('[project]\ndependencies = ["boto3>=1.40.50", "botocore >= 1.40.50"]\n')
    assert lowest_venv.sdk_floor(pyproject) == "1.40.50"
