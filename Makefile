# Entry points, each one command on a fresh machine with Python 3.11:
#   make run    installs into .venv and runs the default workflow (all) on the local data mirror
#   make test   installs into .venv (with what the tests need), lints, and runs the test suite
#   make test-cluster   (root) mines through profiles/slurm on a one-node SLURM cluster it starts
PYTHON ?= python3
VENV ?= .venv
MIRROR ?= ../shared/data
CORES ?= all
BIN = $(VENV)/bin

.PHONY: install test-deps run test lint test-cluster

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)

install: $(BIN)/activate
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[workflow,dev,peers]'

# What the tests need beyond `make install`: mteb, which runs our encoder on one of its own
# tasks, and rsync, with which snakemake-storage-plugin-fs copies (a system package, installed
# with apt-get where it is missing; that needs root).
test-deps: install
	$(BIN)/pip install --quiet -e '.[workflow,dev,peers,mteb]'
	@command -v rsync >/dev/null || [ "$$(id -u)" != 0 ] || \
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rsync >/dev/null; }
	@command -v rsync >/dev/null || { echo "make test: needs rsync (apt-get install rsync, as root)" >&2; exit 1; }

run: install
	$(BIN)/snakemake --cores $(CORES) all --config mirror=$(MIRROR)

lint: install
	$(BIN)/ruff check psp tests benchmarks workflow_scripts
	$(BIN)/ruff format --check psp tests benchmarks workflow_scripts
	$(BIN)/snakefmt --check Snakefile rules/
	PATH=$(BIN):$$PATH $(BIN)/snakemake --lint --config mirror=$(MIRROR) >/dev/null

# tests/cluster is `make test-cluster`'s: it needs the SLURM cluster that target starts. One
# worker per core, each taking whole test files, so a module's workflow run happens once.
test: lint test-deps
	PATH=$(BIN):$$PATH $(BIN)/pytest -q -n auto --dist loadfile --ignore=tests/cluster

test-cluster: install
	PYTHON=$(BIN)/python MIRROR=$(MIRROR) tests/cluster/run_slurm_test.sh
