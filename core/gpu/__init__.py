"""The GPU path: CUDA context, buffer pools, kernels, NVDEC decoding, GL interop (pycuda)."""
