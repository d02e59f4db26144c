# kernelseek-suite: `make test` runs the tests; `make reproduce ARCH=sm90` regenerates results/.
#   make reproduce ARCH=sm90 [RUNTIME=auto|docker|native] [WHEELHOUSE=DIR] [OUT=DIR] [RESUME=1]
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# ARCH, RUNTIME, WHEELHOUSE, OUT and RESUME come from make's command line only: an environment
# variable of the same name (OUT and ARCH are common ones) is not taken for them
$(foreach v,ARCH RUNTIME WHEELHOUSE OUT RESUME,$(if $(filter environment,$(origin $(v))),$(eval undefine $(v))))
ARCH ?= sm90
# torch: a machine that already has one (a GPU image) keeps it; otherwise the CPU build is installed
TORCH_SPEC ?= torch==2.13.0
# reproduce: auto runs in the pinned container where Docker can give it a GPU, else natively
RUNTIME ?= auto
WHEELHOUSE ?=
OUT ?=
RESUME ?=
REPRODUCE_FLAGS = --arch $(ARCH) --runtime $(RUNTIME) $(if $(OUT),--out $(OUT)) $(if $(RESUME),--resume)

.PHONY: setup test test-quick test-gpu lint lint-baseline reproduce check-containers mutation mutation-changed screenshots clean

# the venv sees the machine's own packages (its CUDA torch), also where python3 runs in a venv itself
$(VENV)/.ready: pyproject.toml
	$(PYTHON) suite/reproduce/wheelhouse.py venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.ready

# the tests on two workers (pytest-xdist), CI's two cores; TEST_WORKERS=0 runs them in one process.
# loadgroup: the tests that share a module's fixture (a kernel built once for them) go to one worker
# together (tests/conftest.py, shared_fixture_group)
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

# the CPU unit tests, on two workers as `test`, in under 3 minutes on 2 cores: without the tests marked
# slow, nvcc, browser, network, gpu or integration (whole pipelines end to end: tests/conftest.py,
# INTEGRATION_MODULES)
QUICK = not (slow or nvcc or browser or network or gpu or integration)
test-quick: setup
	$(PY) -m pytest -q -m "$(QUICK)" -n $(TEST_WORKERS) --dist loadgroup

# ruff (lint and format), the import contracts and mypy against .ci/mypy-baseline.txt (docs/development.md)
$(VENV)/.lint-ready: $(VENV)/.ready pyproject.toml
	$(PY) -m pip install -q -e ".[lint]"
	touch $@

lint: $(VENV)/.lint-ready
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m mypy | $(VENV)/bin/mypy-baseline filter

# after fixing type errors listed in the baseline: drop them from it (it only shrinks)
lint-baseline: $(VENV)/.lint-ready
	$(PY) -m mypy | $(VENV)/bin/mypy-baseline sync

# in one process: the GPU tests time kernels on the one GPU, never two at once
test-gpu: setup
	$(PY) -m pytest -q -m "gpu"

# Without the right GPU this runs what it can and fails. make exits 2 for any failed recipe, whatever
# the command's code: the last line names that code ("exited 3": nothing measured; "exited 2": a
# kernel failed its static checks), and a script that needs it runs the command itself (README.md,
# exit codes): make setup && .venv/bin/kernelseek-suite reproduce --arch sm90
define run_reproduce
	@echo "$(VENV)/bin/kernelseek-suite reproduce $(REPRODUCE_FLAGS)"
	@$(VENV)/bin/kernelseek-suite reproduce $(REPRODUCE_FLAGS) || { rc=$$?; \
	  echo "make reproduce: kernelseek-suite reproduce exited $$rc (README.md, exit codes); make's own code is 2" >&2; \
	  exit $$rc; }
endef

ifeq ($(strip $(WHEELHOUSE)),)
# on a GPU machine with an index, the baselines the run measures are installed first (the container,
# RUNTIME=docker, has its own); what cannot be installed is reported by the run as "not installed"
reproduce: setup
	$(if $(filter docker,$(RUNTIME)),,-$(PY) -m kernelseek_suite.reproduce.baselines_install --arch $(ARCH))
	$(run_reproduce)
else
# a GPU node with no internet: every wheel comes from the wheelhouse, checked against its manifest
# (the venv sees the node's own packages, its CUDA torch above all, also where python3 itself runs in
# a venv, as in many GPU images; see `wheelhouse.py venv`)
reproduce:
	$(PYTHON) suite/reproduce/wheelhouse.py venv $(VENV)
	$(PYTHON) suite/reproduce/wheelhouse.py install "$(WHEELHOUSE)" --python $(PY) --root .
	$(run_reproduce)
endif

# Mutation testing of the modules that decide results (docs/mutation-testing.md), one module at a
# time, niced: every module, or MODULE=check (see tests/mutation/modules.yaml); the scores are
# written to tests/mutation/scores.json. JOBS=2 runs two mutants at once.
MODULE ?=
JOBS ?= 1
BASE ?=
mutation: setup
	nice $(PY) scripts/mutation.py $(if $(MODULE),--module $(MODULE)) --jobs $(JOBS) --record

# CI: the modules changed since their recorded score (or since the merge base with BASE=REF); fails
# when one scores below the minimum
mutation-changed: setup
	nice $(PY) scripts/mutation.py --changed $(if $(BASE),--base $(BASE)) --jobs $(JOBS)

# CI: the Dockerfiles' digests and labels, and each pinned Python set resolving (pip --dry-run)
check-containers: setup
	$(PY) -m pip install -q "pip>=24"
	$(VENV)/bin/kernelseek-suite container check --resolve

# the README's screenshots (docs/img/*.png) of REPORT.html and the trace viewer, rendered from the committed
# results/sm90 and taken in headless Chromium, each with its sidecar (*.png.json: the sources' and the PNG's
# sha256, the numbers shown) that tests/test_screenshots.py checks against results/sm90
screenshots: setup
	$(PY) scripts/page-screenshots.py --out docs/img

clean:
	rm -rf $(VENV) .pytest_cache
