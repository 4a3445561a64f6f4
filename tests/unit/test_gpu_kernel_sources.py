"""The CUDA kernels' sources, shipped PTX and host-side helpers, checked without a GPU.

The kernels themselves run in tests/gpu (H200); here: the PTX is built from the
current sources, every .cu compiles cleanly (when nvcc is on this machine), the
launch formats match the kernels' parameter lists, and the layout, colour-matrix
and rectangle helpers agree with the CPU path.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from framelens.core.gpu.kernels import (
    BT601_LIMITED,
    KERNEL_SIGNATURES,
    KERNEL_SOURCES,
    PreprocessLayout,
    find_nvcc,
    kernels_dir,
    pack_rects,
    ptx_digest,
    rect_half_width,
    source_digest,
    yuv_matrix,
)
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.preprocess.cpu import Preprocessor

KERNELS = kernels_dir()


def _spec(
    input_hw: tuple[int, int], letterbox: str = "topleft", dynamic: bool = False
) -> ModelSpec:
    return ModelSpec(
        name="t",
        path=Path("t.onnx"),
        layout="yolox",
        task="detect",
        input_size=input_hw,
        letterbox=letterbox,
        dynamic_input=dynamic,
        input_scale=1 / 255,
    )


# ---- sources and shipped PTX ---------------------------------------------------------------


def test_every_source_is_listed_and_every_listed_source_exists() -> None:
    assert sorted(p.stem for p in KERNELS.glob("*.cu")) == sorted(KERNEL_SOURCES)


@pytest.mark.parametrize("name", KERNEL_SOURCES)
def test_shipped_ptx_was_built_from_the_current_sources(name: str) -> None:
    ptx = KERNELS / f"{name}.ptx"
    assert ptx.is_file(), f"{ptx.name} missing: run python kernels/build.py"
    assert ptx_digest(ptx.read_bytes()) == source_digest(name), (
        f"{ptx.name} is stale: run python kernels/build.py and commit the PTX"
    )


def test_digest_follows_included_headers_and_ignores_line_endings(tmp_path: Path) -> None:
    for f in (*KERNELS.glob("*.cu"), *KERNELS.glob("*.cuh")):
        shutil.copy(f, tmp_path / f.name)
    before = source_digest("preprocess", tmp_path)
    assert before == source_digest("preprocess")
    header = tmp_path / "common.cuh"
    header.write_bytes(header.read_bytes().replace(b"\n", b"\r\n"))
    assert source_digest("preprocess", tmp_path) == before
    header.write_bytes(header.read_bytes() + b"// changed\n")
    assert source_digest("preprocess", tmp_path) != before


_ENTRY = re.compile(r"\.entry\s+(\w+)\s*\(([^)]*)\)", re.S)
_PTX_TYPE = {"P": ".u64", "q": ".u64", "i": ".u32", "f": ".f32"}


def test_launch_formats_match_the_kernels_parameters() -> None:
    """A wrong format would pass garbage to a kernel: compare with the PTX entry points."""
    entries: dict[str, list[str]] = {}
    for name in KERNEL_SOURCES:
        text = (KERNELS / f"{name}.ptx").read_text()
        for fn, params in _ENTRY.findall(text):
            entries[fn] = re.findall(r"\.param\s+(\.\w+)", params)
    assert set(KERNEL_SIGNATURES) == set(entries)
    for fn, (module, fmt) in KERNEL_SIGNATURES.items():
        assert f".entry {fn}(" in (KERNELS / f"{module}.ptx").read_text()
        assert [_PTX_TYPE[c] for c in fmt] == entries[fn], fn


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed here")
@pytest.mark.parametrize("name", KERNEL_SOURCES)
def test_nvcc_compiles_each_kernel_without_warnings_or_spills(name: str, tmp_path: Path) -> None:
    from framelens.kernels import build

    nvcc = find_nvcc()
    assert nvcc is not None
    report = build.resource_report(nvcc, name, "sm_90", KERNELS)  # -Werror all-warnings
    print(report)
    assert report
    for line in report.splitlines():
        assert "stack 0 B, spills 0/0 B" in line, line
    # The shipped PTX's recipe builds, and records this source's digest.
    for f in (*KERNELS.glob("*.cu"), *KERNELS.glob("*.cuh")):
        shutil.copy(f, tmp_path / f.name)
    built = build.build_ptx(nvcc, name, tmp_path)
    assert ptx_digest(built.read_bytes()) == source_digest(name)


# ---- layout: the GPU path's geometry is the CPU path's ------------------------------------


@pytest.mark.parametrize(
    ("spec", "size"),
    [
        (_spec((416, 416)), (641, 479)),
        (_spec((416, 416), "center"), (1917, 1079)),
        (_spec((640, 640), "center"), (33, 17)),
        (_spec((416, 416)), (416, 416)),
        (_spec((640, 640), dynamic=True), (611, 347)),
        (_spec((640, 640), dynamic=True), (1917, 1079)),
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_layout_matches_preprocessor(spec: ModelSpec, size: tuple[int, int], dtype: str) -> None:
    w, h = size
    layout = PreprocessLayout.from_spec(spec, w, h, dtype)
    cpu = Preprocessor(spec, w, h)
    tensor = cpu(np.zeros((h, w, 3), np.uint8))
    assert layout.shape == tensor.shape
    assert layout.nbytes == tensor.size * (2 if dtype == "float16" else 4)
    assert (layout.input_w, layout.input_h) == (cpu.input_w, cpu.input_h)
    assert layout.letterbox == cpu.geometry
    assert (layout.new_w, layout.new_h) == cpu._new_size
    assert layout.scale == (spec.input_scale,) * 3 and layout.offset == (0.0, 0.0, 0.0)


def test_layout_normalisation_and_checks() -> None:
    spec = _spec((320, 320))
    layout = PreprocessLayout.from_spec(spec, 64, 48, mean=(0.5, 0.4, 0.3), std=(0.2, 0.25, 0.5))
    assert layout.scale == pytest.approx((1 / 255 / 0.2, 1 / 255 / 0.25, 1 / 255 / 0.5))
    assert layout.offset == pytest.approx((-2.5, -1.6, -0.6))
    with pytest.raises(ValueError, match="dtype"):
        PreprocessLayout.from_spec(spec, 64, 48, "int8")
    with pytest.raises(ValueError, match="positive"):
        PreprocessLayout.from_spec(spec, 0, 48)


# ---- colour matrices -----------------------------------------------------------------------


def _to_rgb(m: object, y: float, u: float, v: float) -> tuple[float, float, float]:
    from framelens.core.gpu.kernels import YuvMatrix

    assert isinstance(m, YuvMatrix)
    yy = max(y - m.y_offset, 0.0) * m.y_scale
    u, v = u - 128, v - 128
    return (yy + m.r_v * v, yy + m.g_u * u + m.g_v * v, yy + m.b_u * u)


def test_bt601_limited_is_opencvs() -> None:
    assert yuv_matrix() is BT601_LIMITED
    assert yuv_matrix("BT.601", False) is BT601_LIMITED
    assert BT601_LIMITED.args() == (
        16.0,
        1220542 / 2**20,
        1673527 / 2**20,
        -409993 / 2**20,
        -852492 / 2**20,
        2116026 / 2**20,
    )


@pytest.mark.parametrize("standard", ["bt601", "bt709"])
@pytest.mark.parametrize("full", [False, True])
def test_matrices_map_black_white_and_primaries(standard: str, full: bool) -> None:
    m = yuv_matrix(standard, full)
    lo, hi = (0, 255) if full else (16, 235)
    assert _to_rgb(m, lo, 128, 128) == pytest.approx((0, 0, 0), abs=0.6)
    assert _to_rgb(m, hi, 128, 128) == pytest.approx((255, 255, 255), abs=0.6)
    # Pure red encoded with the standard's own Kr, Kb: Y = Kr, U = -Kr/2(1-Kb), V = 1/2.
    kr, kb = {"bt601": (0.299, 0.114), "bt709": (0.2126, 0.0722)}[standard]
    ys, cs = (255, 255) if full else (219, 224)
    y = lo + kr * ys
    u = 128 + (-kr / (2 * (1 - kb))) * cs
    v = 128 + 0.5 * cs
    assert _to_rgb(m, y, u, v) == pytest.approx((255, 0, 0), abs=1.0)


def test_unknown_matrix_is_refused() -> None:
    with pytest.raises(ValueError, match="bt2020"):
        yuv_matrix("bt2020")


# ---- rectangles ----------------------------------------------------------------------------


def test_pack_rects_rounds_clips_and_drops_like_annotate() -> None:
    boxes = np.array(
        [
            [10.5, 11.5, 20.5, 21.4],  # half-even rounding, as round() in annotate()
            [-5.0, -3.0, 700.0, 500.0],  # clipped to the frame
            [650.0, 10.0, 700.0, 20.0],  # wholly right of a 640-wide frame: dropped
            [np.nan, 0.0, 5.0, 5.0],  # NaN: dropped
        ]
    )
    rects = pack_rects(boxes, [(1, 2, 3), (4, 5, 6), (7, 8, 9), (0, 0, 0)], 640, 480, 3)
    assert rects.dtype == np.int32 and rects.shape == (2, 8)
    assert rects[0, :4].tolist() == [10, 12, 20, 21]
    assert rects[1, :4].tolist() == [0, 0, 639, 479]
    assert (rects[:, 4].view(np.uint32) == [0xFF030201, 0xFF060504]).all()  # alpha 255 added
    assert (rects[:, 5] == rect_half_width(3)).all() and rect_half_width(3) == 2
    filled = pack_rects(boxes[:1], (9, 8, 7, 6), 640, 480, 1, filled=True)
    assert filled[0, 5] == -1 and int(filled[0, 4].view(np.uint32)) == 0x06070809
    assert [rect_half_width(t) for t in range(1, 7)] == [0, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="colours"):
        pack_rects(boxes, np.zeros((3, 3)), 640, 480, 1)
