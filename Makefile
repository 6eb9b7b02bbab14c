# Two commands do all set-up on a fresh machine (Python 3.9-3.12 as python3 - CI has 3.11 -, Java 17, git):
#   make demo   - installs mmsctl into .venv and ends with a prediction
#   make test   - installs mmsctl, the test tools and the reference servers, then runs the tests
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PIP    := $(BIN)/python -m pip --disable-pip-version-check -q
# Real MMS 1.1.11 and TorchServe 0.12 for the interop tests, each in its own venv.
MMS_VENV ?= .venv-mms
TS_VENV  ?= .venv-ts
PYTEST_ARGS ?=

.PHONY: demo test test-lowest aws-e2e coverage check install install-test reference-servers boot-wheels clean bench

$(BIN)/mmsctl: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip setuptools wheel
	$(PIP) install -e .
	@touch $@

install: $(BIN)/mmsctl

$(VENV)/.test-deps: $(BIN)/mmsctl pyproject.toml
	$(PIP) install -e '.[test]'
	@touch $@

install-test: $(VENV)/.test-deps

$(MMS_VENV)/.ok:
	$(PYTHON) -m venv $(MMS_VENV)
	$(MMS_VENV)/bin/python -m pip -q install --disable-pip-version-check mxnet==1.9.1 'numpy<1.24' multi-model-server==1.1.11
	@touch $@

$(TS_VENV)/.ok:
	$(PYTHON) -m venv $(TS_VENV)
	$(TS_VENV)/bin/python -m pip -q install --disable-pip-version-check torch==2.13.0 torchserve==0.12.0 torch-model-archiver pyyaml "numpy<2"
	@touch $@

reference-servers: $(MMS_VENV)/.ok $(TS_VENV)/.ok

# The wheels the boot-script test installs an instance from (downloaded once; the test runs offline).
boot-wheels: install-test
	$(BIN)/python scripts/boot_wheels.py

demo: install
	$(BIN)/python scripts/demo.py

# PYTHONDONTWRITEBYTECODE (set in some shells and CI images) is cleared for the run: with it, each of the two
# pytest workers assert-rewrites all ~440 test modules again (~10 CPU s each), and every server, worker and
# CLI process the tests start compiles the mmsctl modules it imports again. __pycache__/ is in .gitignore.
# Three pytest workers on two cores: a test spends much of its time waiting on the processes it starts, and a
# third worker fills those waits (tests/conftest.py keeps each module on one worker, so module-scoped servers
# are not started once per worker). See docs/performance.md, "Suite time".
TEST_WORKERS ?= 3
test: install-test reference-servers boot-wheels
	PYTHON=$(BIN)/python scripts/check
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --durations=15 $(PYTEST_ARGS)

# The AWS tests against the oldest boto3 and botocore pyproject.toml allows (its `botocore>=` floor). botocore
# checks every request's parameters before sending it, so a parameter newer than the floor fails here: sent to
# moto, or only listed by a dry run (tests/support/planned_calls.py). .venv-lowest holds only the pinned SDK and
# reads everything else from .venv (scripts/lowest_venv.py). CI runs it after `make test`.
LOWEST_VENV ?= .venv-lowest
AWS_TESTS ?= tests/cloud tests/lambda_ tests/recipes/test_lambda_pipeline.py
$(LOWEST_VENV)/.ok: $(VENV)/.test-deps pyproject.toml scripts/lowest_venv.py
	$(BIN)/python scripts/lowest_venv.py $(LOWEST_VENV)
	@touch $@

test-lowest: $(LOWEST_VENV)/.ok
	PYTHONDONTWRITEBYTECODE= MMSCTL_TEST_SDK_FLOOR=1 $(LOWEST_VENV)/bin/python -m pytest -n $(TEST_WORKERS) --dist loadgroup $(PYTEST_ARGS) $(AWS_TESTS)

# The whole AWS path on a real account, then all of it removed (scripts/aws_e2e.py; docs/aws.md, "Proving it on a
# real account"): it prints what it makes and an estimate, asks first, and does nothing without MMSCTL_E2E=1 and
# credentials. E2E_ARGS: e.g. --yes --region eu-west-1 --instance-type c5.xlarge.
E2E_ARGS ?=
aws-e2e: install
	$(BIN)/python scripts/aws_e2e.py $(E2E_ARGS)

# The same suite with coverage (pytest-cov, settings in pyproject.toml) of mmsctl/ in the test processes: the
# client, CLI, TUI, engine, archive, zoo and cloud code the tests call in-process. On Python 3.11 coverage's
# tracer sees every line the in-process tests run, libraries included: about a fifth more time than `make test`,
# which is why `make test` leaves it out. The servers and workers the tests start as subprocesses are not
# measured (following them with coverage's `patch = ["subprocess"]` costs half as much CPU again on tests/server).
coverage: install-test reference-servers boot-wheels
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadgroup --cov --cov-report= $(PYTEST_ARGS)
	@echo "coverage of mmsctl/ (in-process): $$($(BIN)/python -m coverage report --format=total --precision=1)%"

check: install-test
	PYTHON=$(BIN)/python scripts/check

bench: install-test reference-servers
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) $(MMS_VENV) $(TS_VENV) $(LOWEST_VENV) build *.egg-info
