"""Detection candidates (the rows whose objectness beats conf) decode a batch exactly as
each frame decoded alone, whichever implementation gathered them and in what order.

Real YOLOX-Nano outputs of real frames of the person sample, run as one batch."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.geometry import Letterbox
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks.base import stack_batch
from framelens.core.stages.tasks.detect.candidates import from_flat, gather_host
from framelens.core.stages.tasks.detect.decoders import make_decoder
from framelens.core.stages.tasks.detect.nms import finish
from framelens.core.stages.tasks.detect.yolo import Yolov5Decoder, _best_class
from framelens.core.types import Detections

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
BATCH = 6


@pytest.fixture(scope="module")
def batch_outputs() -> tuple[npt.NDArray[np.float32], list[Letterbox]]:
    """YOLOX-Nano's output for 6 frames spread over the sample, one engine call."""
    settings = build.resolve(PipelineSettings(resolve_model(DEFAULT_MODEL), batch=BATCH))
    pipeline = build.host_pipeline(settings)
    source = open_source(str(SAMPLE))
    try:
        frames = []
        for i in range(6 * 40):
            frame = source.read()
            assert frame is not None
            if i % 40 == 39:
                frames.append(frame)
        pres = [pipeline.task.preprocessor(f.width, f.height, settings.params) for f in frames]
        batch = stack_batch([pre(f.image) for pre, f in zip(pres, frames, strict=True)])
        out = pipeline.engine.infer(batch)[0]
    finally:
        source.close()
        pipeline.close()
    return np.asarray(out, dtype=np.float32), [p.geometry for p in pres]


def same(a: Detections, b: Detections) -> bool:
    return (
        np.array_equal(a.boxes, b.boxes)
        and np.array_equal(a.scores, b.scores)
        and np.array_equal(a.class_ids, b.class_ids)
    )


@pytest.mark.parametrize(("conf", "classes"), [(0.25, None), (0.01, None), (0.01, frozenset({0}))])
def test_a_batch_decodes_as_each_frame_alone(
    batch_outputs: tuple[npt.NDArray[np.float32], list[Letterbox]],
    conf: float,
    classes: frozenset[int] | None,
) -> None:
    out, geometries = batch_outputs
    decoder = make_decoder(resolve_model(DEFAULT_MODEL))
    together = decoder([out], geometries, conf, 0.45, classes)
    alone = [
        decoder([out[k : k + 1]], [g], conf, 0.45, classes)[0] for k, g in enumerate(geometries)
    ]
    assert len(together) == BATCH
    assert all(same(a, b) for a, b in zip(together, alone, strict=True))
    # and each is what the plain per-frame algorithm gives: gate, best class, boxes, NMS
    assert isinstance(decoder, Yolov5Decoder)
    for k, g in enumerate(geometries):
        pred = out[k]
        cand = np.flatnonzero(pred[:, 4] > conf)
        rows = pred[cand]
        sel, scores, ids = _best_class(rows[:, 5:], rows[:, 4], conf, classes)
        boxes = decoder._boxes(rows[sel], cand[sel], len(pred), g)
        assert same(together[k], finish(boxes, scores, ids, g, 0.45)), k
    if conf == 0.25:  # the sample shows a person in these frames
        assert sum(int(np.count_nonzero(d.class_ids == 0)) for d in together) >= BATCH // 2


def test_candidates_gathered_out_of_order_decode_the_same(
    batch_outputs: tuple[npt.NDArray[np.float32], list[Letterbox]],
) -> None:
    """What the device kernel hands back (slots in scheduling order, each with its flat
    row number) is sorted into the host's order: the same rows, the same detections."""
    out, geometries = batch_outputs
    decoder = make_decoder(resolve_model(DEFAULT_MODEL))
    assert isinstance(decoder, Yolov5Decoder)
    host = gather_host(out, decoder.GATE, 0.05)
    assert len(host.row) > BATCH  # enough to shuffle
    flat = (host.frame * out.shape[1] + host.row).astype(np.int32)
    shuffle = np.random.default_rng(7).permutation(len(flat))
    device_like = from_flat(flat[shuffle], host.values[shuffle], out.shape[0], out.shape[1])
    assert np.array_equal(device_like.frame, host.frame)
    assert np.array_equal(device_like.row, host.row)
    assert np.array_equal(device_like.values, host.values)
    a = decoder.decode_candidates(host, geometries, 0.05, 0.45, None)
    b = decoder.decode_candidates(device_like, geometries, 0.05, 0.45, None)
    assert all(same(x, y) for x, y in zip(a, b, strict=True))
    # the gate is the decoder's first test: no candidate below it, none above it left out
    assert np.all(host.values[:, decoder.GATE] > np.float32(0.05))
    assert len(host.row) == int(np.count_nonzero(out[:, :, decoder.GATE] > 0.05))
