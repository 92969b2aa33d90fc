PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# what `make demo` needs (the runtime) and what the suite and lint need besides (the tests)
RUNTIME := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed

.PHONY: install demo test test-slow test-all test-latest lint format lock docs bench clean

# Installs come from the lock files under requirements/ (uv's resolver wrote them, `make lock`),
# so that a release upstream never changes what a clone runs its tests with; uv installs them
# (in parallel, and without the machine's pip configuration). Its own version is pinned here.
UV_VERSION := 0.13.9
UV := $(BIN)/uv
# pip's -q still prints warnings about index locations; -qq only errors
PIP := $(BIN)/python -m pip -qq
# uv leaves bytecode to be written on first import, which never happens where
# PYTHONDONTWRITEBYTECODE is set: then every command and test process would compile its
# imports from source again, so installs compile it. And the suite may write its own (pytest's
# rewritten test modules: without, collection took twice as long).
UV_INSTALL = $(UV) pip install --quiet --compile-bytecode --python $(BIN)/python
unexport PYTHONDONTWRITEBYTECODE

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install uv==$(UV_VERSION)

# The editable install builds the scoring kernels (a C extension, from Cython; it needs a C
# compiler) beside their sources, again whenever those change, with the setuptools and Cython of
# the lock (no build isolation: nothing unlocked is fetched to build), and leaves tcbreplay's
# bytecode to be written on first import: write it now, since where PYTHONDONTWRITEBYTECODE is
# set every command would compile the sources again. (--no-deps: tests/test_lock.py holds the
# lock to pin every dependency, so nothing comes unpinned.) An empty tcbreplay folder in site-packages,
# left behind by the former hatchling editable install, would be imported instead (removed).
KERNELS := setup.py $(wildcard tcbreplay/_score/kernels/*.pyx tcbreplay/_score/kernels/*.pxi tcbreplay/_score/kernels/*.h)
$(RUNTIME): $(BIN)/python requirements/runtime.txt pyproject.toml $(KERNELS)
	$(UV_INSTALL) -r requirements/runtime.txt
	$(UV_INSTALL) --no-deps --no-build-isolation -e .
	find $(VENV)/lib/python*/site-packages/tcbreplay -depth -type d -empty -delete 2>/dev/null || true
	$(BIN)/python -m compileall -q tcbreplay
	touch $(RUNTIME)

$(STAMP): $(RUNTIME) requirements/test.txt
	$(UV_INSTALL) -r requirements/test.txt
	$(BFCL_INSTALL)
	touch $(STAMP)

install: $(STAMP)

# BFCL's own checker, which the tests and bench-bfcl hold `--scorer bfcl` to: without its
# dependencies (every provider's SDK; bench/bfcl_reference.py stands in for the few imports
# its checker and decoders make)
BFCL_EVAL := bfcl-eval==2026.3.23
BFCL_INSTALL = $(UV_INSTALL) --no-deps $(BFCL_EVAL)

# The built-in benchmark recorded with the offline sim model into the default store (traces/),
# where `tcbreplay runs` and `tcbreplay score demo-sim` look from the repository's root; only
# the runtime is installed. A second `make demo` finds the run complete and scores it again.
demo: $(RUNTIME)
	$(BIN)/tcbreplay record --model sim:seed=7 --run-id demo-sim --workers 8 --quiet
	$(BIN)/tcbreplay score demo-sim

# The lock files: requirements/test.txt from pyproject.toml's dependencies, its test and docs
# extras and the build requirements (requirements/build.in), for Python 3.11 on every platform; then
# requirements/runtime.txt, the runtime's part of the same versions. Commit both.
LOCK := $(UV) pip compile --quiet --universal --python-version 3.11 --no-header --annotation-style line
lock: $(BIN)/python
	$(LOCK) --extra test --extra docs pyproject.toml requirements/build.in -o requirements/test.txt
	$(LOCK) pyproject.toml requirements/build.in -c requirements/test.txt -o requirements/runtime.txt

# The suite against the newest releases that pyproject.toml allows (not the lock), in a venv of
# its own: upstream drift met on purpose. It prints what it ran with beside the lock's pins; a
# failure is a range to narrow or code to mend, then `make lock`. Its editable install builds the
# kernels in place with the newest Cython, so .venv's next install builds them again.
LATEST := .venv-latest
LATEST_INSTALL = $(LATEST)/bin/uv pip install --quiet --compile-bytecode --python $(LATEST)/bin/python
test-latest:
	rm -rf $(LATEST) $(RUNTIME)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip -qq install uv==$(UV_VERSION)
	$(LATEST_INSTALL) --upgrade -r requirements/build.in
	$(LATEST_INSTALL) --upgrade --no-build-isolation -e '.[test]'
	$(LATEST_INSTALL) --no-deps $(BFCL_EVAL)
	sed 's/ .*//' requirements/test.txt > $(LATEST)/locked.txt
	$(LATEST)/bin/uv pip list --python $(LATEST)/bin/python --format freeze --exclude tcbreplay \
		| grep -ivxFf $(LATEST)/locked.txt | sed 's/^/not the lock'"'"'s: /' || true
	$(LATEST)/bin/python -m pytest -q -n auto -p no:cacheprovider

# The suite on every core (pytest-xdist), its 15 slowest tests listed at the end: `test` leaves
# out the tests marked slow (servers started per module but moto's S3, Ray, a browser,
# processes killed mid-run, brute-force property tests), to stay under 4 minutes on 2 cores;
# `test-slow` runs those, `test-all` both. .ci/run runs test, then test-slow.
test: install
	$(BIN)/python -m pytest -q -n auto -m "not slow" --durations=15

test-slow: install
	$(BIN)/python -m pytest -q -n auto -m slow --durations=15

test-all: install
	$(BIN)/python -m pytest -q -n auto --durations=15

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy tcbreplay

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# The manual (docs/, mkdocs.yml) built into site/, warnings as errors: a link to a page or a
# heading that does not exist fails it. The CLI and API references are written in from the code
# (docs/hooks/reference.py). Material for MkDocs' notice about its end of life is left out.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

clean:
	rm -rf $(VENV) $(LATEST) build dist site *.egg-info tcbreplay/_score/kernels/_compiled*.so

# Scoring at scale (not part of `make test`): synthetic runs of 10k, 100k and 1M samples under
# bench/out/, `tcbreplay score` timed against a bare read pass and the reference loop; the table
# goes to BENCHMARKS.md with the hotspots of score. `bench-score` is the quicker 10k + 100k run.
.PHONY: bench-score
bench: install
	$(BIN)/python -m bench.run --sizes 10k,100k,1m --profile

bench-score: install
	$(BIN)/python -m bench.run --sizes 10k,100k

# Scoring and recording past one process (not part of `make test`): `tcbreplay score` of
# 1k, 200k, 1M and 10M generated samples against a bare read pass (peak RSS beside), the 1M
# run on a single-node Ray against the local engine, and `record --shard` over 4 shards
# against one process; the table goes to BENCHMARKS.md under "Scale". SIZES=1k,200k,1m
# leaves out the 10M run (about 8 GB under bench/out/, long to generate on 2 cores).
SIZES ?= 1k,200k,1m,10m
.PHONY: bench-scale
bench-scale: install
	$(BIN)/python -m bench.scale_bench --sizes $(SIZES)

# Scoring on object storage (not part of `make test`): the 1M run of `make bench` uploaded into
# moto's S3 server on loopback, `tcbreplay score` and the bare read pass timed on it and on the
# local store, alternated; the figures, with the machine's load, go to BENCHMARKS.md.
.PHONY: bench-s3
bench-s3: install
	$(BIN)/python -m bench.s3_bench

# Requests per command on object storage (not part of `make test`): the 1k run of `make bench`
# on moto's S3 server on loopback, each command once, its requests counted by method.
.PHONY: bench-s3-requests
bench-s3-requests: install
	$(BIN)/python -m bench.s3_requests

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

# Replay (not part of `make test`): 10,000 samples of the built-in benchmark recorded with sim at
# zero latency and replayed unchanged, in alternation (target: replay at most 1.2x record),
# memory while replaying, and `tcbreplay serve` answering non-streamed OpenAI requests on
# loopback under wrk (Debian's package; a Python client without it; target 2,000/s).
.PHONY: bench-replay
bench-replay: $(STAMP)
	$(BIN)/python -m bench.replay_bench

# BFCL agreement (not part of `make test`): BFCL's 1,000 non-live questions with answers
# synthesized in variants, judged by BFCL's own checker and by `score --scorer bfcl` (which
# must agree on every sample) and the spec scorer; the table goes to BENCHMARKS.md.
.PHONY: bench-bfcl
bench-bfcl: $(STAMP)
	$(BFCL_INSTALL)
	$(BIN)/python -m bench.bfcl_bench

# OpenTelemetry at scale (not part of `make test`): 100,000 OTLP/JSON spans (20,000 agent runs,
# openai-v2's spans written again with fresh ids) imported, wall time and peak memory; then
# `collect` fed them as protobuf requests, spans a second and its memory over the run;
# appended to BENCHMARKS.md under "OpenTelemetry", with the machine's load.
.PHONY: bench-otel
bench-otel: $(STAMP)
	$(BIN)/python -m bench.otel_bench

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
