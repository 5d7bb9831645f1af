# Entry points, each one command on a fresh machine with Python 3.11:
#   make run    installs into .venv and runs the default workflow (all) on the local data mirror
#   make test   installs into .venv, lints, and runs the test suite
#   make test-cluster   (root) mines through profiles/slurm on a one-node SLURM cluster it starts
PYTHON ?= python3
VENV ?= .venv
MIRROR ?= ../shared/data
CORES ?= all
BIN = $(VENV)/bin

.PHONY: install run test lint test-cluster

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/activate
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[workflow,dev,peers,mteb]'

run: install
	$(BIN)/snakemake --cores $(CORES) all --config mirror=$(MIRROR)

lint: install
	$(BIN)/ruff check psp tests benchmarks workflow_scripts
	$(BIN)/ruff format --check psp tests benchmarks workflow_scripts
	$(BIN)/snakefmt --check Snakefile rules/
	PATH=$(BIN):$$PATH $(BIN)/snakemake --lint --config mirror=$(MIRROR) >/dev/null

test: lint
	PATH=$(BIN):$$PATH $(BIN)/pytest -q

test-cluster: install
	PYTHON=$(BIN)/python MIRROR=$(MIRROR) tests/cluster/run_slurm_test.sh
