# Samsa — see README.md. Every tool a test needs is installed from here, never by hand.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: run test test-fast lint bench chaos clean compat-deps bench-deps compile fuzz

$(STAMP): pyproject.toml kproto/_records_native.c storage/_cleaner_native.c
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e .
	touch $@

$(TEST_STAMP): $(STAMP) pyproject.toml
	$(PIP) install -q -e '.[test,lint]'
	touch $@

# Bytecode for our own packages, as a regular pip install writes it: the editable install does not, and
# where PYTHONDONTWRITEBYTECODE is set (as on these machines) every start compiled ~30k lines again
# (port open 243 ms -> 155 ms). Files already up to date are skipped.
compile: $(STAMP)
	@$(PY) -m compileall -q kproto broker storage raft

run: compile
	$(VENV)/bin/samsa serve --data-dir ./samsa-data --listen 127.0.0.1:9092

# compat.mk (owned by compat-tests/) defines compat-deps: kcat, kafkajs, the Java client and the
# reference Kafka's jars from Maven Central (its version: compat-tests/KAFKA_VERSION).
include compat-tests/compat.mk

# Kafka 4.2.1's ProducerPerformance (warm-up records, KIP-1052) for bench/compare's fixed-rate runs.
PERF_TOOLS_LIB := bench/perf-tools/lib
PERF_TOOLS_STAMP := $(PERF_TOOLS_LIB)/.stamp

bench-deps: $(PERF_TOOLS_STAMP)

# Downloaded into lib.tmp and renamed, so an interrupted download never looks complete.
$(PERF_TOOLS_STAMP): bench/perf-tools/pom.xml
	rm -rf $(PERF_TOOLS_LIB).tmp
	cd bench/perf-tools && mvn -q -B dependency:copy-dependencies -DoutputDirectory=lib.tmp
	rm -rf $(PERF_TOOLS_LIB) && mv $(PERF_TOOLS_LIB).tmp $(PERF_TOOLS_LIB)
	touch $@

# Three streams on the 2 cores (tests/chaos/conftest.py groups them): the short chaos runs are one unit and
# every other test module one unit, which the workers take until none is left. Many tests wait (sessions,
# timeouts, JVM starts), so a third worker fills the cores: 1338 s of pytest against 1896 s with two
# (fresh clones, quiet machine, 2026-12-03; SAMSA_TEST_CPU and bench/pytest_cpu.py tell where CPU goes).
test: $(TEST_STAMP) compat-deps bench-deps compile
	$(PY) -m pytest -q -p no:cacheprovider --durations=30 -n 3 --dist loadgroup tests compat-tests

test-fast: $(TEST_STAMP) compile
	$(PY) -m pytest -q -p no:cacheprovider tests

# mypy checks the package as installed (samsa.kproto, ...): build/typecheck/samsa/ links to the folders.
lint: $(TEST_STAMP)
	$(VENV)/bin/ruff check kproto storage raft broker tests compat-tests bench
	@mkdir -p build/typecheck/samsa && for p in kproto storage raft broker; do ln -sfn ../../../$$p build/typecheck/samsa/$$p; done
	$(VENV)/bin/mypy

bench: $(TEST_STAMP) compat-deps bench-deps compile
	$(PY) -m bench

chaos: $(TEST_STAMP) compile
	$(PY) -m pytest -q -s -p no:cacheprovider tests/chaos --chaos-long

clean:
	rm -rf $(VENV) build *.egg-info

# The record-level produce fuzzer (tests/fuzz/record_fuzz.py) against a fresh broker: FUZZ_SECONDS (an hour by
# default), fails on any crash, accepted malformed batch or RSS growth past 256 MiB; prints cases, codes and the
# broker's RSS, and writes the figures to bench/results/fuzz-*.json.
FUZZ_SECONDS ?= 3600
fuzz: $(TEST_STAMP) compile
	$(PY) tests/fuzz/record_fuzz.py --seconds $(FUZZ_SECONDS) --json bench/results/fuzz-$$(date -u +%Y%m%dT%H%M%S).json
