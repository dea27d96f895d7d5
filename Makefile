# Two commands do all the set-up on a fresh machine:
#   make run    install ddp-tui (with the trainer) into .venv and start the app on the local scheduler
#   make test   install the test dependencies (apt + pip) and run the whole test suite
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: run test test-fast durations check lint layers format typecheck bench bench-quick bench-report clean install \
	install-test-deps gpu-check gpu-wheels

$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torchvision imports only with the registry's default torch build (see README), so pin both.
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,trainer]'
	touch $(STAMP)

# The test suite also runs users' scripts written for Lightning, Accelerate and Hugging Face.
FRAMEWORKS := $(VENV)/.frameworks
$(FRAMEWORKS): $(STAMP)
	$(PY) -m pip install -q -c constraints.txt -e '.[dev,trainer,frameworks]'
	touch $(FRAMEWORKS)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/ddp-tui

install-test-deps:
	bash scripts/install-test-deps.sh

# Three workers (pytest-xdist) on the two cores: the tests wait on jobs, schedulers and
# terminals more than they compute. Every test of the real Slurm cluster and sshd runs on one
# of them, in one group; the rest is shared out by file, longest first by
# tests/durations.json (tests/suite/groups.py).
PARALLEL := -n 3 --dist loadgroup --no-loadscope-reorder

# pytest exits 5 when it collected nothing; that is a failure of the suite, not success,
# but it must not hide behind a generic error either: say it plainly.
# The import contracts (docs/architecture.md) run first: a layer that reaches upward fails the
# suite in seconds, before the minutes of tests.
test: install-test-deps $(STAMP) $(FRAMEWORKS)
	$(VENV)/bin/lint-imports --no-logo
	$(PY) -m pytest -ra --durations=25 $(PARALLEL) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# The inner loop: what needs no Slurm, no sshd and no torch job, in a few minutes
# (tests/suite/tiers.py). CI still runs everything, through `make test`.
test-fast: $(STAMP)
	$(PY) -m pytest -q $(PARALLEL) --fast $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

# Every test's duration, refreshed into tests/durations.json (commit it): the order the two
# workers take the files in, and the 25 slowest with their share of the whole.
durations: install-test-deps $(STAMP) $(FRAMEWORKS)
	$(PY) -m pytest -q $(PARALLEL) --budget-fails --record-durations tests/durations.json $(PYTEST_ARGS); \
	rc=$$?; $(PY) scripts/slowest.py tests/durations.json; exit $$rc

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/ruff format --check src tests benchmarks scripts

format: $(STAMP)
	$(VENV)/bin/ruff format src tests benchmarks scripts
	$(VENV)/bin/ruff check --fix src tests benchmarks scripts

layers: $(STAMP)
	$(VENV)/bin/lint-imports --no-logo

typecheck: $(STAMP)
	$(VENV)/bin/mypy

check: lint layers typecheck test

# Every benchmarks/bench_*.py in full (about an hour here: bench_clean_exit's 200 torchrun runs
# take 20 minutes, bench_observe's 7, bench_telemetry's 5 to 7), each timed; each writes
# benchmarks/results/<name>.json, which `make bench-report` prints as one table. Every one also
# runs in a quick mode in the suite (tests/benchmarks/test_quick_modes.py).
bench: $(STAMP)
	@rc=0; for f in benchmarks/bench_*.py; do \
	  start=$$(date +%s); $(PY) $$f || { echo "$$f FAILED"; rc=1; }; \
	  echo "== $$f: $$(( $$(date +%s) - start )) s"; \
	done; exit $$rc

bench-quick: $(STAMP)
	@rc=0; for f in benchmarks/bench_*.py; do \
	  start=$$(date +%s); $(PY) $$f --quick > /dev/null || { echo "$$f FAILED"; rc=1; }; \
	  echo "== $$f --quick: $$(( $$(date +%s) - start )) s"; \
	done; exit $$rc

bench-report:
	@$(PYTHON) benchmarks/record.py

# The GPU check (benchmarks/gpu_check.py, about 5 minutes on one GPU): `make gpu-wheels` here, with
# the registries, downloads the app's packages for the GPU machine's Python into .gpu-wheels/;
# `make gpu-check` there (no network, no install: torch is on its image) carries them in and
# writes gpu-check-report/. Without CUDA it checks its CPU-side parts and exits 0.
GPU_CHECK_PY   := $(shell test -x $(PY) && echo $(PY) || echo $(PYTHON))
GPU_CHECK_ARGS ?=
gpu-check:
	$(GPU_CHECK_PY) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

gpu-wheels:
	bash scripts/gpu-wheels.sh

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache
