#!/bin/bash
# On the H200 test machine, from the checkout root, after the kit pieces were stashed
# (see ../shared/device/README.md: base, av, pnvc, ort0..ort5, each in its own call):
#
#   bash tests/gpu/run_on_h200.sh [tests|bench|srbench|streams|all] [pytest args...]
#
# Installs the kit and FrameLens into /tmp/kit/site, runs tests/gpu (marker gpu) and/or
# the H200 benchmark; logs and JSON go to $OUT (or ./out when OUT is unset).
set -uo pipefail
what=${1:-all}; shift || true
OUT=${OUT:-$PWD/out}; mkdir -p "$OUT"
bash .device/bin/ondevice.sh setup 2>&1 | tail -8
. /tmp/kit/env.sh
python3 -m pip install -q --no-deps --no-build-isolation --no-compile --target /tmp/kit/site . \
    2>&1 | grep -v -i "warning" | tail -3
# TensorRT-RTX, stashed earlier as .device/trtx0 and .device/trtx1 (its 95 MB libs wheel
# in 45 MiB parts, the bindings wheel and the meta package): installed once per machine
S=/tmp/kit/stage
if ls $S/trtxpart* >/dev/null 2>&1 && [[ ! -d /tmp/kit/site/tensorrt_rtx ]]; then
    libs=/tmp/kit/tensorrt_rtx_cu13_libs-1.7.1.116-py3-none-manylinux_2_28_x86_64.whl
    cat $S/trtxpart* > $libs
    if [[ "$(md5sum $libs | cut -d' ' -f1)" == "$(cat $S/trtx.md5)" ]]; then
        python3 -m pip install -q --no-deps --no-build-isolation --target /tmp/kit/site \
            $libs $S/tensorrt_rtx_cu13_bindings-*.whl $S/tensorrt_rtx_cu13-1*.whl 2>&1 | tail -2
    else
        echo "tensorrt-rtx: parts missing or corrupt ($(ls $S/trtxpart* | wc -l) of 3)"
    fi
fi
# pure-Python wheels the kit lacks, carried in .device/extra (onnxconverter-common: FP16)
for w in .device/extra/*.whl; do
    [[ -f $w ]] && python3 -m pip install -q --no-deps --target /tmp/kit/site "$w" 2>&1 | tail -1
done
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv
status=0
if [[ $what == tests || $what == all ]]; then
    # tests named in the arguments (tests/gpu/x.py[::name]) replace the whole folder
    targets=(tests/gpu); for a in "$@"; do [[ $a == tests/* ]] && targets=(); done
    python3 -m pytest "${targets[@]}" -m gpu -q -rs -p no:cacheprovider \
        -o faulthandler_timeout=240 --junitxml="$OUT/gpu-tests.xml" \
        "$@" 2>&1 | tee "$OUT/gpu-tests.log" | tail -60
    status=${PIPESTATUS[0]}
fi
if [[ $what == streams ]]; then
    python3 benchmarks/streams.py ${BENCH_ARGS:-} --output "$OUT/h200-streams-$(date +%F).json" 2>&1 | tee "$OUT/streams.log" | tail -30
fi
if [[ $what == srbench ]]; then
    python3 benchmarks/superres.py ${BENCH_ARGS:-} --output "$OUT/h200-superres-$(date +%F).json" 2>&1 | tee "$OUT/srbench.log" | tail -40
fi
if [[ $what == bench || $what == all ]]; then
    python3 benchmarks/h200.py ${BENCH_ARGS:-} --output "$OUT/h200-$(date +%F).json" 2>&1 | tee "$OUT/bench.log" | tail -40
fi
exit "$status"
