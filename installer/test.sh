#!/usr/bin/env bash
# Install with the test tools, then lint and run the whole test suite (GUI tests
# start their own Xvfb through pytest-xvfb; GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
bash installer/setup.sh --dev
.venv/bin/ruff check app core gui tests benchmarks
.venv/bin/lint-imports
# type-check the installed package (entry layer, core and gui, all strict) so framelens.* imports resolve
.venv/bin/mypy -p framelens
exec .venv/bin/python -m pytest -q "$@"
