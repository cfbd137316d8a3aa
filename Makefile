# Fresh machine: `make demo` or `make test`. Both create .venv and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# `make demo`: the methods that detect members on the sandbox: those of `all` (but `probe`, at
# chance on a model this small, and `neighbor`, which needs a fill-mask model) and the named-only
# recall, conrecall and pac (recall's shots hold 7 member documents out of every method's
# evaluation); infill detects as well as the best but its passes take longer than all the
# others together, so it runs in `make demo-all` with samia; tests/test_sandbox.py checks
# the lists against the registry
DEMO_METHODS := dcpdd,gapk,loss,lowercase,maxk,mink,minkpp,ref,surp,zlib,recall,conrecall,pac
# windows of 32 and 128 words only (the sandbox's default adds 64): the same split, models and
# windows of each length as the default, so the same figures, in under 5 minutes on 2 cores
DEMO_FLAGS := --windows 32,128
# `make demo-all`: every method of `all` and the five of SPEC 3b, samia with 5 samples of at
# most 32 new tokens (SPEC: 10, up to 1024 tokens in all) to keep it under half an hour on a CPU
DEMO_ALL_METHODS := all,recall,conrecall,pac,samia:samples=5,max_new_tokens=32,infill
STAMP := $(VENV)/.installed
# Python keeps each module's compiled bytecode (__pycache__, ignored by git) even where the
# machine's environment says not to (PYTHONDONTWRITEBYTECODE=1): otherwise every process the
# demo and the tests start compiles pddkit's modules again, and pytest rewrites every test
# file's asserts again in each worker (collection: 19 s -> 8 s a worker)
export PYTHONDONTWRITEBYTECODE :=
# `make test` prints its 30 slowest tests (and fixtures) last, to see where the suite's time goes
# pytest-xdist workers of `make test` (each test file runs whole on one worker, the longest
# files first: tests/conftest.py HEAVY_FIRST; the trained toy models are built once and shared)
TEST_WORKERS ?= 2
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 on every build
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs
# a real OpenAI-compatible server for the tests (tests/test_llama_server.py): llama-cpp-python
# built from its source distribution (about 10-15 minutes on 2 cores the first time; pip keeps
# the wheel in its cache after that), and llama.cpp's own GGUF converter from that same
# source distribution, unpacked beside it
LLAMA_CPP := 0.3.36
SERVER_STAMP := $(VENV)/.server-installed
CONVERTER := $(VENV)/llama-convert
# GGML_NATIVE=OFF: a wheel that runs on any x86-64 machine sharing pip's cache; no
# multimodal library, no downloads from llama.cpp's own code
LLAMA_CMAKE := -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF

.PHONY: install server demo demo-all test fast lint bench clean browser docs docs-serve

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU wheel first: a looser requirement would pull gigabytes of CUDA packages
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test,docs]"
	touch $(STAMP)

install: $(STAMP)

$(SERVER_STAMP): $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE)" CMAKE_BUILD_PARALLEL_LEVEL=2 \
	  $(BIN)/pip install -q "llama-cpp-python[server]==$(LLAMA_CPP)" sentencepiece
	rm -rf $(CONVERTER) $(VENV)/llama-sdist && mkdir -p $(CONVERTER)
	$(BIN)/pip download -q --no-deps --no-binary :all: "llama-cpp-python==$(LLAMA_CPP)" -d $(VENV)/llama-sdist
	tar -xzf $(VENV)/llama-sdist/llama_cpp_python-$(LLAMA_CPP).tar.gz -C $(CONVERTER) \
	  --strip-components=3 llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/convert_hf_to_gguf.py \
	  llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/conversion \
	  llama_cpp_python-$(LLAMA_CPP)/vendor/llama.cpp/gguf-py
	rm -rf $(VENV)/llama-sdist
	touch $(SERVER_STAMP)

server: $(SERVER_STAMP)

demo: $(STAMP)
	$(BIN)/pddkit sandbox --output demo-output --overwrite --methods $(DEMO_METHODS) $(DEMO_FLAGS)

demo-all: $(STAMP)
	$(BIN)/pddkit sandbox --output demo-all-output --overwrite --methods $(DEMO_ALL_METHODS)

# the report test renders report.html in headless Chromium (Debian packages)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium for the report's browser test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
	  || echo "could not install chromium: the browser test will be skipped outside CI"; }

test: $(STAMP) $(SERVER_STAMP) browser
	$(BIN)/ruff check src tests benchmarks
	$(MKDOCS) build --strict --quiet
	PDDKIT_DOCS_SITE=site $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile \
	  --no-loadscope-reorder --durations=30

# the inner loop: the tests not marked slow
fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

# the documentation site (docs/, mkdocs.yml) into site/; --strict: a broken link or anchor, a page
# left out of the navigation or an object mkdocstrings cannot find is an error
docs: $(STAMP)
	$(MKDOCS) build --strict

# serve it on http://127.0.0.1:8000, rebuilt on every change
docs-serve: $(STAMP)
	$(MKDOCS) serve --strict

bench: $(STAMP)
	$(BIN)/python benchmarks/stats_pass.py

clean:
	rm -rf $(VENV) demo-output demo-all-output .pytest_cache site
