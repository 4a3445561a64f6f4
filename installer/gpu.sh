#!/usr/bin/env bash
# The GPU stack of FrameLens into ./.venv, on a machine with an NVIDIA driver and the
# CUDA toolkit (nvcc): pycuda built with OpenGL interop, PyNvVideoCodec (NVDEC into
# device memory) and the TensorRT flavour the GPU runs (TensorRT-RTX or TensorRT 10/11).
#   installer/gpu.sh              (setup.sh calls it when an NVIDIA GPU is present)
# Each part is optional: what fails is reported, and FrameLens falls back (texture upload
# instead of interop, PyAV decoding instead of NVDEC, ONNX Runtime instead of TensorRT).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PIP=".venv/bin/python -m pip"
CUDA_ROOT="${CUDA_ROOT:-/usr/local/cuda}"
if ! command -v nvcc >/dev/null && [ ! -x "$CUDA_ROOT/bin/nvcc" ]; then
  echo "gpu.sh: no CUDA toolkit (nvcc) found; set CUDA_ROOT or install cuda-toolkit" >&2
  exit 2
fi
export PATH="$CUDA_ROOT/bin:$PATH"

# pycuda from source, configured with GL interop (the PyPI wheel has no GL support).
if ! .venv/bin/python -c "import pycuda.gl" 2>/dev/null; then
  tmp=$(mktemp -d)
  if $PIP download -q --no-deps --no-binary=:all: --no-build-isolation "pycuda>=2024.1" -d "$tmp" \
      && tar xzf "$tmp"/pycuda-*.tar.gz -C "$tmp"; then
    src=$(ls -d "$tmp"/pycuda-*/ | head -1)
    (cd "$src" && "$ROOT/.venv/bin/python" configure.py --cuda-root="$CUDA_ROOT" --cuda-enable-gl >/dev/null \
      && "$ROOT/.venv/bin/python" -m pip install -q --no-build-isolation .) \
      && echo "pycuda with OpenGL interop installed" \
      || echo "gpu.sh: pycuda could not be built with GL (is libgl-dev installed?)" >&2
  else
    echo "gpu.sh: could not fetch the pycuda source" >&2
  fi
  rm -rf "$tmp"
fi

$PIP install -q "PyNvVideoCodec>=1.0" && echo "PyNvVideoCodec installed" \
  || echo "gpu.sh: PyNvVideoCodec not installed; decoding falls back to PyAV" >&2
# TensorRT: the flavour the GPU runs. TensorRT-RTX (pip, public wheels) runs RTX GPUs,
# compute capability 7.5, 8.0, 8.6, 8.9 and 12.x; TensorRT 10/11 runs the others (data
# centre GPUs such as the H100/H200, 9.0) where NVIDIA's wheels can be reached.
CC=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ')
case "$CC" in
  7.5|8.0|8.6|8.9|12.*)
    $PIP install -q "tensorrt-rtx-cu13>=1.7" && echo "TensorRT-RTX installed (GPU compute capability $CC)" \
      || echo "gpu.sh: TensorRT-RTX not installed; inference uses ONNX Runtime's CUDA provider" >&2 ;;
  "")
    echo "gpu.sh: no GPU compute capability from nvidia-smi; TensorRT not installed" >&2 ;;
  *)
    $PIP install -q "tensorrt>=10" && echo "TensorRT installed (GPU compute capability $CC: not an RTX target)" \
      || echo "gpu.sh: TensorRT not installed (compute capability $CC needs TensorRT 10/11, not TensorRT-RTX); inference uses ONNX Runtime's CUDA provider" >&2 ;;
esac
.venv/bin/framelens doctor || true
