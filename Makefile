PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install demo test lint format bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The editable install leaves tcbreplay's bytecode to be written on first import; write it now,
# since where PYTHONDONTWRITEBYTECODE is set every command would compile the sources again.
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m compileall -q tcbreplay
	touch $(STAMP)

# The scoring kernels compiled ahead of time (tcbreplay/kernels/_aot*.so, about 20 s), again
# whenever their sources change; without a C compiler scoring compiles them just in time.
KERNELS_STAMP := $(VENV)/.kernels
$(KERNELS_STAMP): $(STAMP) $(wildcard tcbreplay/kernels/*.py)
	$(BIN)/python -m tcbreplay.kernels.build || echo "kernels not built ahead of time: scoring compiles them on first use"
	$(BIN)/python -c 'from tcbreplay import spec; spec.warm()'
	touch $(KERNELS_STAMP)

install: $(STAMP) $(KERNELS_STAMP)

demo: install
	$(BIN)/tcbreplay record --model sim:seed=7 --run-id demo-sim --workers 8 --store traces/demo --quiet
	$(BIN)/tcbreplay score demo-sim --store traces/demo

test: install
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build dist *.egg-info

# Scoring at scale (not part of `make test`): synthetic runs of 10k, 100k and 1M samples under
# bench/out/, `tcbreplay score` timed against a bare read pass and the reference loop; the table
# goes to BENCHMARKS.md with the hotspots of score. `bench-score` is the quicker 10k + 100k run.
.PHONY: bench-score
bench: install
	$(BIN)/python -m bench.run --sizes 10k,100k,1m --profile

bench-score: install
	$(BIN)/python -m bench.run --sizes 10k,100k

# The HTML report of a 10,000-sample run in headless Chromium (not part of `make test`): its size
# and time to interactive, printed and appended to BENCHMARKS.md under "Report".
.PHONY: bench-report
bench-report: $(STAMP)
	$(BIN)/python -m bench.report_bench --samples 10000

# Recording (not part of `make test`): throughput with a 0.2 s sim latency and 64 workers,
# per-sample cost, memory over 10,000 samples, kill -9 at 20 moments then resume.
.PHONY: bench-record
bench-record: $(STAMP)
	$(BIN)/python -m bench.record_bench
