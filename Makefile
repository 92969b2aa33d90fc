PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test test-fast lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The editable install builds the scoring kernels (a C extension, from Cython; it needs a C
# compiler) beside their sources, again whenever those change, and leaves tcbreplay's bytecode
# to be written on first import: write it now, since where PYTHONDONTWRITEBYTECODE is set every
# command would compile the sources again. setuptools' editable install is an import finder,
# which it says at length (the warning left out); an empty tcbreplay folder in site-packages,
# left behind by the former hatchling editable install, would be imported instead (removed).
KERNELS := setup.py $(wildcard tcbreplay/_score/kernels/*.pyx tcbreplay/_score/kernels/*.pxi tcbreplay/_score/kernels/*.h)
$(STAMP): $(BIN)/python pyproject.toml $(KERNELS)
	PYTHONWARNINGS="ignore:Editable installation" $(BIN)/python -m pip install --quiet -e '.[test]'
	$(BFCL_INSTALL)
	find $(VENV)/lib/python*/site-packages/tcbreplay -depth -type d -empty -delete 2>/dev/null || true
	$(BIN)/python -m compileall -q tcbreplay
	touch $(STAMP)

install: $(STAMP)

# BFCL's own checker, which the tests and bench-bfcl hold `--scorer bfcl` to: without its
# dependencies (every provider's SDK; bench/bfcl_reference.py stands in for the few imports
# its checker and decoders make)
BFCL_EVAL := bfcl-eval==2026.3.23
BFCL_INSTALL := $(BIN)/python -m pip install --quiet --no-deps $(BFCL_EVAL)

demo: install
	$(BIN)/tcbreplay record --model sim:seed=7 --run-id demo-sim --workers 8 --store traces/demo --quiet
	$(BIN)/tcbreplay score demo-sim --store traces/demo

# the whole suite on every core (pytest-xdist), its 15 slowest tests listed at the end;
# test-fast leaves out those marked slow
test: install
	$(BIN)/python -m pytest -q -n auto --durations=15

test-fast: install
	$(BIN)/python -m pytest -q -n auto -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy tcbreplay

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist *.egg-info tcbreplay/_score/kernels/_compiled*.so

# Scoring at scale (not part of `make test`): synthetic runs of 10k, 100k and 1M samples under
# bench/out/, `tcbreplay score` timed against a bare read pass and the reference loop; the table
# goes to BENCHMARKS.md with the hotspots of score. `bench-score` is the quicker 10k + 100k run.
.PHONY: bench-score
bench: install
	$(BIN)/python -m bench.run --sizes 10k,100k,1m --profile

bench-score: install
	$(BIN)/python -m bench.run --sizes 10k,100k

# Scoring with gold rules on every sample (not part of `make test`): the 1M run of `make bench`
# and the same run with accept lists and order-free groups, `tcbreplay score` timed on both,
# a slice of the second checked against the plain-Python spec; appended to BENCHMARKS.md.
.PHONY: bench-rules
bench-rules: install
	$(BIN)/python -m bench.rules_bench

# The HTML report of a 10,000-sample run in headless Chromium (not part of `make test`): its size
# and time to interactive, printed and appended to BENCHMARKS.md under "Report".
.PHONY: bench-report
bench-report: $(STAMP)
	$(BIN)/python -m bench.report_bench --samples 10000

# The wheel as a user gets it (not part of `make test`): built from these sources, installed
# into a fresh virtualenv, the demo recorded, and the first `tcbreplay score` timed and checked
# for warnings.
.PHONY: wheel-check
wheel-check: $(BIN)/python
	$(BIN)/python -m bench.wheel_check

# Recording (not part of `make test`): throughput with a 0.2 s sim latency and 64 workers,
# per-sample cost, memory over 10,000 samples, kill -9 at 20 moments then resume.
.PHONY: bench-record
bench-record: $(STAMP)
	$(BIN)/python -m bench.record_bench

# BFCL agreement (not part of `make test`): BFCL's 1,000 non-live questions with answers
# synthesized in variants, judged by BFCL's own checker and by `score --scorer bfcl` (which
# must agree on every sample) and the spec scorer; the table goes to BENCHMARKS.md.
.PHONY: bench-bfcl
bench-bfcl: $(STAMP)
	$(BFCL_INSTALL)
	$(BIN)/python -m bench.bfcl_bench

# Does each metric track τ-bench's own verdict (not part of `make test`)? The shared τ-bench
# sample imported into a fresh store under bench/out/, scored with its six state-changing
# tools as the role write (then focused on them: --only write), and `tcbreplay validity` of
# both scorings printed as Markdown (the tables in BENCHMARKS.md, "Metric validity").
TAU_REF ?= ../shared/reference/tau-bench
TAU_WRITE := book_reservation,cancel_reservation,update_reservation_flights,update_reservation_passengers,update_reservation_baggages,send_certificate
.PHONY: bench-validity
bench-validity: $(STAMP)
	rm -rf bench/out/validity
	$(BIN)/tcbreplay --store bench/out/validity import --format tau-bench --run-id tau \
		--traces $(TAU_REF)/gpt-4o-airline-sample.json --tools $(TAU_REF)/airline-tools.json
	$(BIN)/tcbreplay --store bench/out/validity score tau --role write=$(TAU_WRITE) --format csv > /dev/null
	$(BIN)/tcbreplay --store bench/out/validity validity tau --scoring spec --format markdown
	$(BIN)/tcbreplay --store bench/out/validity score tau --role write=$(TAU_WRITE) --only write --format csv > /dev/null
	$(BIN)/tcbreplay --store bench/out/validity validity tau --scoring spec_only-write --format markdown
