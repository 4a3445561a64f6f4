#!/usr/bin/env bash
# Set up FrameLens in ./.venv on Debian/Ubuntu: Qt's system libraries (apt, when
# missing), then the Python package with exactly one ONNX Runtime.
#   installer/setup.sh            install (CPU ONNX Runtime unless an NVIDIA GPU is present)
#   installer/setup.sh --dev      also the test tools (and Xvfb for the GUI tests)
#   installer/setup.sh --run      install, then open the app on the bundled sample
set -euo pipefail
cd "$(dirname "$0")/.."
DEV=0; RUN=0
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --run) RUN=1 ;;
    *) echo "usage: installer/setup.sh [--dev] [--run]" >&2; exit 2 ;;
  esac
done

QT_PACKAGES="libgl1-mesa-dri libglx-mesa0 libegl-mesa0 libxkbcommon-x11-0 libxcb-cursor0
  libxcb-icccm4 libxcb-keysyms1 libxcb-image0 libxcb-render-util0 libxcb-xinerama0
  libxcb-randr0 libxcb-shape0 libxcb-xkb1 libfontconfig1 libdbus-1-3"
# --dev: Xvfb for the GUI tests; GStreamer's RTSP server (run by the system Python) for
# the stream reconnect tests; FFmpeg's ffprobe, the oracle of the frame-exact tests
[ "$DEV" = 1 ] && QT_PACKAGES="$QT_PACKAGES xvfb python3-gi gir1.2-gst-rtsp-server-1.0
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good ffmpeg"
missing=""
for p in $QT_PACKAGES; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ] && command -v apt-get >/dev/null; then
  SUDO=""; [ "$(id -u)" != 0 ] && SUDO="sudo"
  echo "installing system packages:$missing"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
fi

PY="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# onnxruntime and onnxruntime-gpu ship the same module: installing both hides the
# CUDA provider. Pick one.
if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then ORT=onnxruntime-gpu; else ORT=onnxruntime; fi
EXTRAS=""; [ "$DEV" = 1 ] && EXTRAS="[dev]"
# strict editable mode: a real package tree, so mypy and import-linter see framelens.*
.venv/bin/python -m pip install -q -e ".$EXTRAS" "$ORT" --config-settings editable_mode=strict
# TrackEval (HOTA, CLEAR and Identity metrics for `framelens evaluate`) declares
# opencv-python, the Qt-bundling OpenCV that must never sit beside PySide6's: installed
# without its dependencies (what it uses, numpy, scipy and matplotlib, FrameLens has).
.venv/bin/python -m pip install -q --no-deps "trackeval==1.3.0"
if [ "$DEV" = 1 ]; then
  # The second, independent implementations the tracker tests hold ours against
  # (Roboflow's trackers with supervision) and the MOT sample data with its published
  # metrics (py-motmetrics): they declare opencv-python too, so the same way.
  .venv/bin/python -m pip install -q --no-deps "trackers==2.6.1" "supervision==0.31.2" \
    "pydeprecate==0.14.0" "rich>=13" "defusedxml==0.7.1" "motmetrics==1.4.0"
fi
# ByteTrack's and OC-SORT's compiled steps (numba), compiled once here into numba's disk
# cache rather than on the first tracked frame of a session (~10-20 s)
echo "Compiling the trackers (once)..."
.venv/bin/python -m framelens.core.stages.tracking.compile_ahead \
  || echo "The trackers were not compiled ahead: a first session compiles its own (~10 s)"
echo "FrameLens installed in .venv ($ORT)"
if [ "$ORT" = onnxruntime-gpu ]; then
  bash installer/gpu.sh || echo "GPU extras incomplete: FrameLens runs, with the fallbacks 'framelens doctor' lists"
fi
# `framelens` lives in the environment, not on PATH: say how to start it
cat <<EOF

Start FrameLens (the window; \`framelens run VIDEO\` for the command line):
  $PWD/.venv/bin/framelens
or activate the environment once per terminal, then type \`framelens\`:
  source $PWD/.venv/bin/activate
  framelens
EOF
if [ "$RUN" = 1 ]; then
  exec .venv/bin/framelens gui "$(.venv/bin/python -c 'from framelens.cli import sample_video; print(sample_video())')"
fi
