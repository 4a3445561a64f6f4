"""PSNR and SSIM: known values, the properties a similarity measure must have, and a
brute-force SSIM written straight from Wang et al.'s definition."""

from __future__ import annotations

import math

import numpy as np
import pytest
from framelens.core.stages.tasks.superres.metrics import image_agreement, psnr, ssim

RNG = np.random.default_rng(7)


def textured(h: int = 64, w: int = 80, channels: int = 3) -> np.ndarray:
    """A smooth gradient with texture: structure for SSIM to see."""
    y, x = np.mgrid[0:h, 0:w]
    base = 128 + 60 * np.sin(x / 7.0) * np.cos(y / 5.0) + RNG.normal(0, 10, (h, w))
    img = np.clip(base, 0, 255).astype(np.uint8)
    return np.repeat(img[..., None], channels, axis=2) if channels > 1 else img


def noisy(img: np.ndarray, sigma: float, seed: int = 1) -> np.ndarray:
    noise = np.random.default_rng(seed).normal(0, sigma, img.shape)
    return np.clip(img.astype(np.float64) + noise, 0, 255).astype(np.uint8)


def test_identical_images_are_infinite_psnr_and_ssim_one() -> None:
    img = textured()
    assert psnr(img, img.copy()) == math.inf
    assert ssim(img, img.copy()) == pytest.approx(1.0, abs=1e-12)
    agreement = image_agreement(img, img)
    assert agreement.psnr_db == math.inf and agreement.ssim == pytest.approx(1.0)


def test_known_values_on_constant_images() -> None:
    a = np.full((32, 32), 100, np.uint8)
    b = np.full((32, 32), 110, np.uint8)
    # MSE 100 -> 10 log10(255^2 / 100)
    assert psnr(a, b) == pytest.approx(10 * math.log10(255**2 / 100), abs=1e-9)
    # No variance, no covariance: SSIM is the luminance term (2ab + C1) / (a^2 + b^2 + C1).
    c1 = (0.01 * 255) ** 2
    assert ssim(a, b) == pytest.approx((2 * 100 * 110 + c1) / (100**2 + 110**2 + c1), abs=1e-9)


def test_more_noise_means_lower_psnr_and_ssim() -> None:
    img = textured()
    sigmas = (2, 5, 10, 20, 40)
    psnrs = [psnr(img, noisy(img, s)) for s in sigmas]
    ssims = [ssim(img, noisy(img, s)) for s in sigmas]
    assert psnrs == sorted(psnrs, reverse=True) and len(set(psnrs)) == len(psnrs)
    assert ssims == sorted(ssims, reverse=True) and len(set(ssims)) == len(ssims)
    assert all(-1.0 <= v < 1.0 for v in ssims)


def test_symmetric() -> None:
    a, b = textured(), noisy(textured(), 15)
    assert psnr(a, b) == psnr(b, a)
    assert ssim(a, b) == pytest.approx(ssim(b, a), abs=1e-12)


def test_colour_is_the_mean_of_its_channels() -> None:
    gray_a, gray_b = textured(channels=1), noisy(textured(channels=1), 12)
    colour_a = np.stack([gray_a] * 3, axis=2)
    colour_b = np.stack([gray_b, gray_b, gray_a], axis=2)
    expected = (2 * ssim(gray_a, gray_b) + 1.0) / 3
    assert ssim(colour_a, colour_b) == pytest.approx(expected, abs=1e-12)


def _brute_force_ssim(a: np.ndarray, b: np.ndarray) -> float:
    """Wang et al. 2004 pixel by pixel: 11x11 Gaussian weights (sigma 1.5, normalised),
    mirrored borders, map averaged without its 5-pixel border."""
    k = np.arange(11) - 5
    g = np.exp(-(k**2) / (2 * 1.5**2))
    w = np.outer(g, g) / np.outer(g, g).sum()
    x = np.pad(a.astype(np.float64), 5, mode="symmetric")
    y = np.pad(b.astype(np.float64), 5, mode="symmetric")
    c1, c2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2
    values = []
    for i in range(5, a.shape[0] - 5):
        for j in range(5, a.shape[1] - 5):
            px, py = x[i : i + 11, j : j + 11], y[i : i + 11, j : j + 11]
            mx, my = (w * px).sum(), (w * py).sum()
            vx, vy = (w * (px - mx) ** 2).sum(), (w * (py - my) ** 2).sum()
            cov = (w * (px - mx) * (py - my)).sum()
            values.append(
                ((2 * mx * my + c1) * (2 * cov + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
            )
    return float(np.mean(values))


def test_matches_the_definition_computed_pixel_by_pixel() -> None:
    a = textured(24, 28, channels=1)
    b = noisy(a, 20)
    assert ssim(a, b) == pytest.approx(_brute_force_ssim(a, b), abs=1e-6)


def test_rejects_different_shapes_and_types() -> None:
    img = textured()
    with pytest.raises(ValueError, match="shape"):
        psnr(img, img[:-1])
    with pytest.raises(ValueError, match="uint8"):
        ssim(img.astype(np.float32), img.astype(np.float32))
