# kernelseek-suite: `make test` runs the tests; `make reproduce ARCH=sm90` regenerates results/.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ARCH ?= sm90
# torch: a machine that already has one (a GPU image) keeps it; otherwise the CPU build is installed
TORCH_SPEC ?= torch==2.13.0

.PHONY: setup test test-gpu reproduce clean

$(VENV)/.ready: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

setup: $(VENV)/.ready

test: setup
	$(PY) -m pytest -q

test-gpu: setup
	$(PY) -m pytest -q -m "gpu"

reproduce: setup
	$(VENV)/bin/kernelseek-suite bench --arch $(ARCH) --kernel kernels/reference/attn_fwd_ref.cu --baseline fa3 --baseline cudnn --extended --out results/$(ARCH)/reference

clean:
	rm -rf $(VENV) .pytest_cache
