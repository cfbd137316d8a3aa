# Fresh machine: `make demo` or `make test`. Both create .venv and install into it.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
# the sandbox's methods plus the five of SPEC 3b; samia with 5 samples of at most 32 new
# tokens (SPEC: 10, up to 1024 tokens in all) to keep the demo in minutes on a CPU
DEMO_METHODS := all,recall,conrecall,pac,samia:samples=5,max_new_tokens=32,infill
STAMP := $(VENV)/.installed
# pytest-xdist workers of `make test` (each test file runs whole on one worker; the trained
# toy models are built once and shared, tests/conftest.py)
TEST_WORKERS ?= 2
# NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2 on every build
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

.PHONY: install demo test fast lint bench clean browser docs docs-serve

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# the CPU wheel first: a looser requirement would pull gigabytes of CUDA packages
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e ".[test,docs]"
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/pddkit sandbox --output demo-output --overwrite --methods $(DEMO_METHODS)

# the report test renders report.html in headless Chromium (Debian packages)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing chromium for the report's browser test"; \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver) \
	  || echo "could not install chromium: the browser test will be skipped outside CI"; }

test: $(STAMP) browser
	$(BIN)/ruff check src tests benchmarks
	$(MKDOCS) build --strict --quiet
	PDDKIT_DOCS_SITE=site $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile

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
	rm -rf $(VENV) demo-output .pytest_cache site
