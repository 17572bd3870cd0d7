# Numavia: the two commands a newcomer needs are `make demo` and `make test` (see README.md).
VENV    ?= .venv
PY      := $(VENV)/bin/python
NUMAVIA := $(VENV)/bin/numavia
JOBS    ?= 2

.PHONY: help setup test test-fast sim demo firmware firmware-zephyr fuzz soak bitstream flash clean \
        lint lint-py lint-c lint-c-format format format-c

help:
	@echo "make setup            install Debian packages and the pinned Python environment"
	@echo "make demo             set up, then build, boot and measure a 4-node ring (report in results/demo)"
	@echo "make test             run every test (unit, gateware, firmware, end-to-end simulation)"
	@echo "make test-fast        the tests that need no Verilator build"
	@echo "make lint             every check below: what CI runs before the tests"
	@echo "make format           reformat the Python (ruff) and C/C++ (clang-format) sources in place"
	@echo "make lint-py          ruff (lint, format check) and mypy (the typed host and build API)"
	@echo "make sim              build and boot the simulated ring (NODES=2)"
	@echo "make firmware         build the bare-metal firmware for the simulated SoC"
	@echo "make firmware-zephyr  build the Zephyr application (needs ZEPHYR_BASE or a west workspace)"
	@echo "make fuzz             every fuzz target for FUZZ_SECONDS each (default 60; corpus in build/fuzz)"
	@echo "make soak             full-size reliability soaks (10^6 coherence ops, 10^5 VIA messages; a few hours on 2 cores)"
	@echo "make bitstream BOARD=b  build a board's bitstream and the bare-SoC comparison (b: colorlight_i5, ecpix5)"
	@echo "make flash BOARD=b      load it with openFPGALoader (CABLE=... to choose the cable)"
	@echo "make lint-c           C/C++ formatting (clang-format) and the firmware core built with -Werror"
	@echo "make format-c         reformat the C/C++ sources in place"
	@echo "make clean            remove build/ (all cached Verilog, Verilator models, firmware)"

setup:
	@bash .ci/setup.sh

test: setup
	$(VENV)/bin/pytest -n $(JOBS) --maxschedchunk 1 --durations=25

test-fast: setup
	$(VENV)/bin/pytest -n $(JOBS) --maxschedchunk 1 -m "not slow"

lint: lint-py lint-c

format: setup format-c
	$(VENV)/bin/ruff check --select I --fix --quiet
	$(VENV)/bin/ruff format --quiet

lint-py: setup
	$(VENV)/bin/ruff check
	$(VENV)/bin/ruff format --check
	$(VENV)/bin/mypy

NODES ?= 2
sim: setup
	$(NUMAVIA) sim --nodes $(NODES)

DEMO_NODES ?= 4
demo: setup
	$(NUMAVIA) demo --nodes $(DEMO_NODES) --out results/demo

firmware: setup
	$(NUMAVIA) firmware

FUZZ_SECONDS ?= 60
fuzz: setup
	$(PY) tests/fuzz/fuzz_all.py --seconds $(FUZZ_SECONDS)

soak: setup
	$(PY) tests/soak.py --out results/soak

firmware-zephyr:
	@bash firmware/zephyr/build.sh

BOARD ?= colorlight_i5
bitstream: setup
	$(NUMAVIA) build --board $(BOARD) --compare-bare --out results/boards

flash: setup
	$(NUMAVIA) flash --board $(BOARD) $(if $(CABLE),--cable $(CABLE))

# The C and C++ sources the project owns (generated ones live under build/). The pytest
# tests/test_c_format.py runs the same check through lint-c-format.
C_FORMAT_DIRS  := firmware soc/verilator tests/cpp renode/cosim
C_FORMAT_FILES  = $(shell find $(C_FORMAT_DIRS) -name build -prune -o -type f \
                    \( -name '*.c' -o -name '*.h' -o -name '*.cpp' -o -name '*.hpp' \) -print | LC_ALL=C sort)
LINT_C_DIR     := build/lint-c

lint-c-format:
	@clang-format --dry-run -Werror $(C_FORMAT_FILES) && echo "lint-c: $(words $(C_FORMAT_FILES)) C/C++ files formatted"

format-c:
	clang-format -i $(C_FORMAT_FILES)

# Formatting, then the firmware core and its unit tests compiled for the host with -Werror.
lint-c: setup lint-c-format
	$(PY) -c "import sys; from numavia.base import codegen; codegen.write_all(sys.argv[1])" $(LINT_C_DIR)/generated
	$(MAKE) -s -C firmware/tests BUILD_DIR=$(abspath $(LINT_C_DIR)) GEN_DIR=$(abspath $(LINT_C_DIR))/generated

clean:
	rm -rf build
