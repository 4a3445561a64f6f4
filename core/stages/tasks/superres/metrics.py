"""How alike two images are: PSNR and SSIM, for panes whose model outputs an image.

They apply to image outputs (super-resolution); detection panes have none, and
their image agreement is reported as not applicable (null), never computed on the
annotated frames, which would measure the overlays rather than the model.

SSIM follows Wang, Bovik, Sheikh and Simoncelli, "Image quality assessment: from
error visibility to structural similarity", IEEE TIP 13(4), 2004: local means,
variances and covariance under an 11x11 Gaussian window of sigma 1.5, K1 = 0.01,
K2 = 0.03, L = 255, no sample-covariance correction (the same choice as
scikit-image's ``gaussian_weights=True, use_sample_covariance=False``). The SSIM map
is averaged without its 5-pixel border, where the window reaches outside the image;
colour images average the per-channel values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
import numpy.typing as npt

__all__ = ["ImageAgreement", "image_agreement", "psnr", "ssim"]

_L = 255.0
_C1 = (0.01 * _L) ** 2
_C2 = (0.03 * _L) ** 2
_WINDOW = 11
_SIGMA = 1.5

ImageArray = npt.NDArray[np.uint8]


@dataclass(frozen=True, slots=True)
class ImageAgreement:
    """PSNR (dB, ``inf`` for identical images) and SSIM (1.0 for identical) of one frame."""

    psnr_db: float
    ssim: float


def _check_pair(a: ImageArray, b: ImageArray) -> None:
    if a.shape != b.shape:
        raise ValueError(f"images differ in shape: {a.shape} and {b.shape}")
    if a.dtype != np.uint8 or b.dtype != np.uint8:
        raise ValueError("PSNR and SSIM take uint8 images")
    if a.ndim not in (2, 3) or a.size == 0:
        raise ValueError(f"not an image: shape {a.shape}")


def psnr(a: ImageArray, b: ImageArray) -> float:
    """Peak signal-to-noise ratio in dB over all pixels and channels; ``inf`` when equal."""
    _check_pair(a, b)
    if np.array_equal(a, b):
        return math.inf  # cv2.PSNR would return its cap (361 dB) instead
    return float(cv2.PSNR(a, b, _L))


def _blur(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    out = cv2.GaussianBlur(x, (_WINDOW, _WINDOW), _SIGMA, borderType=cv2.BORDER_REFLECT)
    return np.asarray(out, dtype=np.float64)


def _ssim_channel(x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]) -> float:
    mu_x, mu_y = _blur(x), _blur(y)
    var_x = _blur(x * x) - mu_x * mu_x
    var_y = _blur(y * y) - mu_y * mu_y
    cov = _blur(x * y) - mu_x * mu_y
    ssim_map = ((2 * mu_x * mu_y + _C1) * (2 * cov + _C2)) / (
        (mu_x * mu_x + mu_y * mu_y + _C1) * (var_x + var_y + _C2)
    )
    pad = (_WINDOW - 1) // 2
    inner = ssim_map[pad:-pad, pad:-pad]
    return float((inner if inner.size else ssim_map).mean())


def ssim(a: ImageArray, b: ImageArray) -> float:
    """Mean structural similarity (Wang et al. 2004, see the module doc), in [-1, 1]."""
    _check_pair(a, b)
    x = a.astype(np.float64).reshape(a.shape[0], a.shape[1], -1)
    y = b.astype(np.float64).reshape(b.shape[0], b.shape[1], -1)
    values = [_ssim_channel(x[..., c], y[..., c]) for c in range(x.shape[2])]
    return float(np.mean(values))


def image_agreement(reference: ImageArray, test: ImageArray) -> ImageAgreement:
    """PSNR and SSIM of ``test`` against ``reference``; different sizes are a ValueError."""
    return ImageAgreement(psnr(reference, test), ssim(reference, test))
