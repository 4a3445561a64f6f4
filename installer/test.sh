#!/usr/bin/env bash
# Install with the test tools, then lint and run the whole test suite (GUI tests
# start their own Xvfb through pytest-xvfb; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash installer/setup.sh --dev
# TensorRT 10's published stubs, for mypy on the TensorRT backend (types only, no
# runtime; their own dependencies are the CUDA 12 TensorRT wheels, hence --no-deps)
.venv/bin/python -m pip install -q --no-deps "tensorrt-stubs==10.13.0.35.1"
.venv/bin/python installer/tensorrt_stubs.py
.venv/bin/ruff check app core gui tests benchmarks
.venv/bin/ruff format --check app core gui tests benchmarks
.venv/bin/lint-imports
# type-check the installed package (entry layer, core and gui, all strict) so framelens.* imports resolve
.venv/bin/mypy -p framelens
# FrameLens' own bytecode, compiled once (pip compiled its dependencies'): where
# PYTHONDONTWRITEBYTECODE is set, each of the ~130 processes the tests start (the CLI,
# Ray workers) would compile the package again
.venv/bin/python -m compileall -q -j 0 "$(.venv/bin/python -c 'import framelens, os; print(os.path.dirname(framelens.__file__))')"
# Arguments (a file, -k ...): one plain pytest run of what they pick. None: the whole
# suite in two phases: first the tests that assert no rate, latency or signal timing,
# then those marked `serial`. Both run their tests in a worker process (pytest-xdist),
# so that a test that hangs ends only its worker (below). The first phase takes one
# worker for now: with two (-n 2 --dist loadfile, ~4 minutes less) every CI run of
# 2026-12-07 failed one to three tests that raced the other worker's load, a new set
# each time (CONTRIBUTING.md); 2 here again once such runs stay green.
if [ "$#" -gt 0 ]; then exec .venv/bin/python -m pytest -q "$@"; fi
# pytest's exit codes: 1 is failed tests (the serial phase still runs, so that one run
# tells every failure); anything else (2 interrupted, 3-5 no run) ends here.
# Each test has its own limit (faulthandler_timeout, pyproject.toml: past it the test's
# process prints every thread's stack and ends); each phase has one too, for a hang
# outside any test (installer/limit.sh). A test that hangs ends its worker process,
# is reported as crashed, and the phase goes on in a new worker. -rfE: the closing
# summary names failures and errors only, so that the end of a long CI log shows them
# (-ra, the default, lists ~130 GPU skips).
. installer/limit.sh
failed=0
limited 40m "the first phase (tests not marked serial)" \
    .venv/bin/python -m pytest -q -rfE -n 1 -m "not soak and not serial" || failed=$?
[ "$failed" -le 1 ] || exit "$failed"
limited 10m "the serial phase" \
    .venv/bin/python -m pytest -q -rfE -n 1 -m "serial and not soak" || failed=$?
exit "$failed"
