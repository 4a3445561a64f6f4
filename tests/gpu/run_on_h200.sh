#!/bin/bash
# On the H200 test machine, from the checkout root, after the kit pieces were stashed
# (see ../shared/device/README.md: base, av, pnvc, ort0..ort5, each in its own call):
#
#   bash tests/gpu/run_on_h200.sh [tests|bench|srbench|streams|paced|window|latency|soak|archive|all] [args...]
#
# `WALL_SCREEN=1 ... window`: the video wall of 16 copies of the 1080p30 video in the real
# window, results made against results on screen (benchmarks/wall_screen.py).
# `WALL_PAINT=1 ... window`: one paint of the wall's canvas timed on this host's GUI thread
# with NVIDIA's GL (benchmarks/wall_paint.py --shared).
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
# a tar of extra pieces (tests/gpu/prepare_extras.sh: win = X server and Qt, ray = Ray and
# pyarrow), stashed as parts <name>part*, unpacked once into /tmp/kit/<name>
assemble() {
    local name=$1 tar=/tmp/kit/$1.tar
    [[ -d /tmp/kit/$name ]] && return 0
    if ! ls $S/${name}part* >/dev/null 2>&1; then echo "$name: no parts stashed"; return 1; fi
    cat $S/${name}part* > $tar
    if [[ "$(md5sum $tar | cut -d' ' -f1)" != "$(cat $S/$name.md5 2>/dev/null)" ]]; then
        echo "$name: parts missing or corrupt ($(ls $S/${name}part* | wc -l) stashed)"; rm -f $tar; return 1
    fi
    mkdir -p /tmp/kit/$name && tar -C /tmp/kit/$name -xf $tar && rm -f $tar
}
# numba and llvmlite (ByteTrack compiled), stashed as .device/nb0 and nb1 (nbpart*, nb.md5):
# installed once per machine, then the tracker compiled once into numba's cache
if [[ ! -d /tmp/kit/site/numba ]] && assemble nb; then
    python3 -m pip install -q --no-deps --no-compile --target /tmp/kit/site /tmp/kit/nb/*.whl 2>&1 | tail -1
fi
t0=$SECONDS; python3 -m framelens.core.stages.tracking.compile_ahead \
    && echo "trackers compiled or loaded from numba's cache in $((SECONDS - t0)) s"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total,clocks.sm --format=csv
status=0
if [[ $what == tests || $what == all ]]; then
    # tests named in the arguments (tests/gpu/x.py[::name]) replace the whole folder; a
    # test past 4 minutes prints its stacks and goes on (the call's own limit ends it)
    targets=(tests/gpu); for a in "$@"; do [[ $a == tests/* ]] && targets=(); done
    python3 -m pytest "${targets[@]}" -m gpu -q -rs -p no:cacheprovider \
        -o faulthandler_timeout=240 -o faulthandler_exit_on_timeout=false --junitxml="$OUT/gpu-tests.xml" \
        "$@" 2>&1 | tee "$OUT/gpu-tests.log" | tail -60
    status=${PIPESTATUS[0]}
fi
if [[ $what == streams ]]; then  # rows 5 runs each and the NVDEC ceiling over processes
    python3 benchmarks/streams.py ${BENCH_ARGS:-} --output "$OUT/h200-streams-$(date +%F).json" 2>&1 | tee "$OUT/streams.log" | tail -30
    status=${PIPESTATUS[0]}
fi
if [[ $what == paced ]]; then  # N live 1080p30 cameras: the largest N with none dropped
    python3 benchmarks/streams.py --paced ${BENCH_ARGS:-} --output "$OUT/h200-paced-$(date +%F).json" 2>&1 | tee "$OUT/paced.log" | tail -30
    status=${PIPESTATUS[0]}
fi
if [[ $what == srbench ]]; then
    python3 benchmarks/superres.py ${BENCH_ARGS:-} --output "$OUT/h200-superres-$(date +%F).json" 2>&1 | tee "$OUT/srbench.log" | tail -40
fi
if [[ $what == bench || $what == all ]]; then
    python3 benchmarks/h200.py ${BENCH_ARGS:-} --output "$OUT/h200-$(date +%F).json" 2>&1 | tee "$OUT/bench.log" | tail -40
fi
if [[ $what == window ]]; then
    # The real Qt window with NVIDIA's OpenGL: Xvfb and Mesa (for the X server's own GLX)
    # and the X client libraries Qt's xcb plugin needs (Debian packages, unpacked under
    # /tmp/kit/xroot, not /) and PySide6, stashed as .device/win0..N; glvnd's loaders
    # carried in .gl (unpacked to / as the device tool's README says); clients get
    # NVIDIA's GLX through __GLX_VENDOR_LIBRARY_NAME.
    X=/tmp/kit/xroot; L=$X/usr/lib/x86_64-linux-gnu; W=/tmp/kit/win
    assemble win || exit 3
    for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
    if [[ ! -x $X/usr/bin/Xvfb ]]; then mkdir -p $X; for f in $W/debs/*.deb; do dpkg -x "$f" $X; done; fi
    [[ -x /usr/bin/xkbcomp ]] || cp $X/usr/bin/xkbcomp /usr/bin/xkbcomp  # Xvfb runs it from there
    if [[ ! -d /tmp/kit/qt/PySide6 ]]; then
        python3 -m pip install -q --no-deps --target /tmp/kit/qt $W/wheels/*.whl 2>&1 | tail -2
    fi
    mkdir -p /tmp/kit/fontcache
    cat > /tmp/kit/fonts.conf <<XML
<?xml version="1.0"?><!DOCTYPE fontconfig SYSTEM "fonts.dtd">
<fontconfig><dir>$X/usr/share/fonts</dir><cachedir>/tmp/kit/fontcache</cachedir></fontconfig>
XML
    # Debian 12 puts some libraries (libdbus) under /lib, not /usr/lib
    export LD_LIBRARY_PATH=$L:$X/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} FONTCONFIG_FILE=/tmp/kit/fonts.conf
    ldd $X/usr/bin/Xvfb | grep "not found"
    # one X server for the window calls of a machine (one left by an ended call is gone)
    if ! kill -0 "$(tr -d ' ' 2>/dev/null < /tmp/.X77-lock)" 2>/dev/null; then
        rm -f /tmp/.X77-lock /tmp/.X11-unix/X77
        LIBGL_DRIVERS_PATH=$L/dri $X/usr/bin/Xvfb :77 -screen 0 1920x1200x24 +extension GLX \
            -xkbdir $X/usr/share/X11/xkb -nolisten tcp >"$OUT/xvfb.log" 2>&1 &
        sleep 3
    fi
    export DISPLAY=:77 QT_QPA_PLATFORM=xcb __GLX_VENDOR_LIBRARY_NAME=nvidia PYOPENGL_PLATFORM=glx
    export PYTHONPATH=/tmp/kit/qt:$PYTHONPATH
    ls /usr/lib/x86_64-linux-gnu/libGLX_nvidia* /usr/local/nvidia/lib64/libGLX_nvidia* 2>/dev/null | head -3
    video=/tmp/framelens-person-1080p.mp4
    [[ -f $video ]] || python3 benchmarks/make_1080p.py $video --frames 900
    if [[ -n ${WALL_PAINT:-} ]]; then  # what one paint of the wall costs this host's GUI thread
        python3 benchmarks/wall_paint.py --shared --runs 5 ${BENCH_ARGS:-} \
            --output "$OUT/h200-wall-paint-$(date +%F).json" 2>&1 | tee "$OUT/wall-paint.log" | tail -30
    elif [[ -n ${WALL_SCREEN:-} ]]; then  # the wall's results against those on screen
        kind=""; [[ " ${BENCH_ARGS:-} " == *" --processes "* ]] && kind="-processes"
        python3 benchmarks/wall_screen.py --video $video --sources 16 --device cuda:0 \
            --runs 5 ${BENCH_ARGS:-} --output "$OUT/h200-wall-$(date +%F)$kind.json" \
            2>&1 | tee "$OUT/wall$kind.log" | grep -v "UserWarning\|^  \|No registered" | tail -30
    else
        python3 benchmarks/qt_window_gpu.py --video $video ${BENCH_ARGS:-} \
            --output "$OUT/h200-display-path-$(date +%F).json" --screenshot "$OUT/h200-window.png" \
            2>&1 | tee "$OUT/window.log" | tail -60
    fi
    status=${PIPESTATUS[0]}
    [[ -f "$OUT/xvfb.log" ]] && tail -5 "$OUT/xvfb.log"
fi
video=/tmp/framelens-person-1080p.mp4
if [[ $what == latency || $what == soak ]] && [[ ! -f $video ]]; then
    python3 benchmarks/make_1080p.py $video --frames 900
fi
if [[ $what == latency ]]; then  # rough edge 8: a frame on screen, behind decode + inference
    long=/tmp/framelens-person-1080p-3600.mp4  # 2 min: warm-up + window at up to 16x
    [[ -f $long ]] || python3 benchmarks/make_1080p.py $long --frames 3600
    python3 benchmarks/live_latency.py --device cuda:0 --video $long ${BENCH_ARGS:---speed 4} \
        --output "$OUT/h200-live-latency-$(date +%F).json" 2>&1 | tee "$OUT/latency.log" | tail -30
    status=${PIPESTATUS[0]}
fi
if [[ $what == soak ]]; then  # device and host memory over 10,000 frames of the GPU player
    python3 benchmarks/soak_player.py --device cuda:0 ${BENCH_ARGS:---frames 30000} \
        --output "$OUT/h200-soak-player-$(date +%F).json" 2>&1 | tee "$OUT/soak.log" | tail -30
    status=${PIPESTATUS[0]}
fi
if [[ $what == archive ]]; then  # framelens batch on Ray with GPU actors (.device/ray0..M)
    assemble ray || exit 3
    if [[ ! -d /tmp/kit/raysite/ray ]]; then  # only what the device's Python lacks
        wheels=()
        for w in /tmp/kit/ray/wheels/*.whl; do
            m=$(basename "$w" | cut -d- -f1 | tr A-Z a-z)
            case $m in attrs) m=attr;; protobuf) m=google.protobuf;; pyyaml) m=yaml;;
                       rpds_py) m=rpds;; esac
            python3 -c "import $m" 2>/dev/null || wheels+=("$w")
        done
        python3 -m pip install -q --no-deps --no-compile --target /tmp/kit/raysite "${wheels[@]}" \
            2>&1 | grep -v -i warning | tail -3
    fi
    export PYTHONPATH=$PYTHONPATH:/tmp/kit/raysite PATH=$PATH:/tmp/kit/raysite/bin
    python3 benchmarks/archive_throughput.py --device cuda:0 ${BENCH_ARGS:-} \
        --output "$OUT/h200-archive-$(date +%F).json" 2>&1 | tee "$OUT/archive.log" | tail -30
    status=${PIPESTATUS[0]}
fi
exit "$status"
