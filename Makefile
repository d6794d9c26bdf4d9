# meve — `make demo` and `make test` work on a fresh clone (they create .venv themselves).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.stamp-install
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.DEFAULT_GOAL := help
.PHONY: help venv demo test test-fast test-oldest lint docs bench bench-quick train-verifier clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F ':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, pinned: the local CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[all,dev]"
	touch $(STAMP)

venv: $(STAMP) ## create .venv and install meve with every extra

demo: $(STAMP) ## Standard top-k vs MeVe side by side on the built-in corpus
	$(VENV)/bin/meve demo

test: $(STAMP) ## the whole suite (slow benchmarks excluded)
	$(PY) -m pytest -q

test-fast: $(STAMP) ## unit tests only (no model loads)
	$(PY) -m pytest -q tests/unit

OLDEST := .venv-oldest
test-oldest: ## the integration tests against the lowest versions pyproject.toml allows (.ci/oldest.txt; about 10 minutes)
	$(PYTHON) -m venv $(OLDEST)
	$(OLDEST)/bin/python -m pip install -q torch==2.13.0 uv
	$(OLDEST)/bin/uv pip install -q --python $(OLDEST)/bin/python --link-mode=copy -c .ci/oldest.txt -e ".[all,dev]"
	$(OLDEST)/bin/python -m pytest -q tests/integration tests/unit/test_api.py

docs: $(STAMP) ## build the documentation site into site/ (mkdocs, warnings are errors)
	$(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP) ## ruff + mypy (library, adapters, tests, examples, benchmarks)
	$(VENV)/bin/ruff check shared langchain_meve llamaindex_meve tests examples benchmarks
	$(VENV)/bin/ruff format --check shared langchain_meve llamaindex_meve tests examples benchmarks
	$(VENV)/bin/mypy

BENCH_STAMP := $(VENV)/.stamp-bench
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[all,dev,bench]"
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) ## every benchmark (about two hours on 2 cores; not in CI); writes benchmarks/results and BENCHMARKS.md
	$(PY) -m benchmarks.run --full $(if $(DATA),--data $(DATA))

bench-quick: $(BENCH_STAMP) ## small slices of every benchmark (a few minutes once embeddings are cached)
	$(PY) -m benchmarks.run --quick $(if $(DATA),--data $(DATA))

train-verifier: $(BENCH_STAMP) ## refit late interaction's calibration (1 min), the token codebook and its calibration (8 min), retrain meve's cross-encoder (45 min on 2 cores) and its 3-layer sibling, distilled from it (31 min); seeded; not in CI
	$(PY) -m benchmarks.train_verifier $(if $(DATA),--data $(DATA))
	$(PY) -m benchmarks.token_store --fit $(if $(DATA),--data $(DATA))
	$(PY) -m benchmarks.train_verifier --compressed $(if $(DATA),--data $(DATA))
	$(PY) -m benchmarks.train_cross_encoder --steps 2500 --ship-step 2000 $(if $(DATA),--data $(DATA))
	$(PY) -m benchmarks.train_cross_encoder --steps 2500 --layers 3 --freeze-embeddings --teacher shared/meve/weights/cross_encoder.safetensors \
		--out benchmarks/.cache/cross_encoder_l3 --ship shared/meve/weights/cross_encoder_l3.safetensors $(if $(DATA),--data $(DATA))

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) $(OLDEST) .pytest_cache .mypy_cache .ruff_cache
