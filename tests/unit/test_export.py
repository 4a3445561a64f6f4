"""Exporters write real files with real PyAV; a failure never leaves a file behind."""

from __future__ import annotations

import csv
import itertools
import json
import os
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np
import pytest
from framelens.core.errors import ExportError
from framelens.core.stages.draw.opencv import annotate
from framelens.core.stages.sinks import (
    AtomicFile,
    DetectionsWriter,
    VideoExporter,
    atomic_output,
    load_detections_json,
    provenance_metadata,
    save_snapshot,
)
from framelens.core.types import Detections

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources/samples/one-by-one-person-detection.mp4"  # 768x432, 10 fps, no audio
BOTTLE = ROOT / "tests/data/bottle-detection.mp4"  # 640x360, 179/6 fps

META = {
    "app_version": "0.1.0",
    "model": "yolox-nano",
    "model_sha256": "0123456789abcdef" * 4,
    "precision": "fp32",
    "backend": "onnxruntime",
    "device": "cpu",
    "conf": 0.25,
    "iou": 0.45,
    "source": str(SAMPLE),
    "source_fps": 10.0,
    "width": 768,
    "height": 432,
}
LABELS = ["person", "bicycle", "car"]


# -- helpers ----------------------------------------------------------------------------


def _decode(path: Path, start: int, count: int) -> tuple[list[tuple[np.ndarray, float]], Any]:
    """Frames ``start .. start+count-1`` as (BGR image, pts seconds), and the time base."""
    with av.open(str(path)) as c:
        stream = c.streams.video[0]
        tb = stream.time_base
        out = []
        for i, f in enumerate(c.decode(stream)):
            if i >= start:
                out.append((f.to_ndarray(format="bgr24"), float(f.pts * f.time_base)))
            if len(out) == count:
                break
    return out, tb


def _read_video(path: Path) -> tuple[list[float], int, int, dict[str, str]]:
    with av.open(str(path)) as c:
        meta = {k.lower(): v for k, v in c.metadata.items()}
        pts, w, h = [], 0, 0
        for f in c.decode(video=0):
            pts.append(float(f.pts * f.time_base))
            w, h = f.width, f.height
    return pts, w, h, meta


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _make_clip(
    path: Path,
    *,
    seconds: float = 3.0,
    fps: int = 25,
    size: tuple[int, int] = (160, 96),
    acodec: str = "aac",
    rate: int = 48000,
    layout: str = "stereo",
    sample_fmt: str = "fltp",
) -> None:
    """A small clip: a grey ramp and a 440 Hz sine."""
    w, h = size
    with av.open(str(path), "w") as out:
        vs = out.add_stream("libx264", rate=fps)
        vs.width, vs.height, vs.pix_fmt = w, h, "yuv420p"
        aus = out.add_stream(acodec, rate=rate)
        aus.layout = layout
        aus.format = sample_fmt
        for i in range(int(seconds * fps)):
            f = av.VideoFrame.from_ndarray(np.full((h, w, 3), i * 3 % 256, np.uint8), "bgr24")
            f.pts, f.time_base = i, Fraction(1, fps)
            out.mux(vs.encode(f))
        out.mux(vs.encode(None))
        channels = 2 if layout == "stereo" else 1
        total, t0 = int(seconds * rate), 0
        while t0 < total:
            n = min(1024, total - t0)
            x = (0.2 * np.sin(2 * np.pi * 440 * np.arange(t0, t0 + n) / rate)).astype(np.float32)
            af = av.AudioFrame.from_ndarray(np.stack([x] * channels), format="fltp", layout=layout)
            af.sample_rate, af.pts, af.time_base = rate, t0, Fraction(1, rate)
            out.mux(aus.encode(af))
            t0 += n
        out.mux(aus.encode(None))


def _audio_seconds(path: Path) -> float | None:
    with av.open(str(path)) as c:
        if not c.streams.audio:
            return None
        rate = c.streams.audio[0].codec_context.sample_rate
        return sum(f.samples for f in c.decode(audio=0)) / rate


@pytest.fixture(scope="module")
def sample_frames() -> tuple[list[tuple[np.ndarray, float]], Any]:
    if not SAMPLE.exists():
        pytest.skip("sample video missing")
    return _decode(SAMPLE, 20, 30)  # a range that does not start at 0


@pytest.fixture
def unwritable_dir(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() == 0:
        pytest.skip("root ignores directory permissions")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    yield ro
    ro.chmod(0o755)


# -- atomic ------------------------------------------------------------------------------


def test_atomic_output_replaces_on_success(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with atomic_output(target) as tmp:
        assert tmp.parent == tmp_path
        assert tmp.name.startswith(".out.partial-") and tmp.suffix == ".bin"
        tmp.write_bytes(b"new")
        assert target.read_bytes() == b"old"  # not visible before success
    assert target.read_bytes() == b"new"
    assert _leftovers(tmp_path) == ["out.bin"]


def test_atomic_output_failure_keeps_old_file_and_removes_temp(tmp_path: Path) -> None:
    target = tmp_path / "out.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(target) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert _leftovers(tmp_path) == ["out.bin"]


def test_atomic_file_keeps_umask_permissions(tmp_path: Path) -> None:
    f = AtomicFile(tmp_path / "x.txt")
    mode = f.tmp.stat().st_mode & 0o777
    f.discard()
    umask = os.umask(0)
    os.umask(umask)
    assert mode == 0o666 & ~umask


@pytest.mark.parametrize("name", ["missing/x.mp4", "file.txt/x.mp4"])
def test_atomic_rejects_missing_directory(tmp_path: Path, name: str) -> None:
    (tmp_path / "file.txt").write_text("a file, not a folder")
    with pytest.raises(ExportError, match=r"^cannot write .*x\.mp4: ") as err:
        AtomicFile(tmp_path / name)
    assert "\n" not in str(err.value)


# -- video -------------------------------------------------------------------------------


def test_video_round_trip_mp4(tmp_path: Path, sample_frames: Any) -> None:
    frames, tb = sample_frames
    out_path = tmp_path / "annotated.mp4"
    dets = Detections(
        np.array([[100, 50, 300, 400]], np.float32),
        np.array([0.87], np.float32),
        np.array([0], np.int32),
    )
    tags = provenance_metadata(META)
    with VideoExporter(
        out_path, width=768, height=432, fps=10.0, time_base_hint=tb, metadata=tags
    ) as ex:
        for img, pts in frames:
            ex.write(annotate(img, dets, LABELS), pts)
    assert ex.encoder_name in ("h264_nvenc", "libx264", "mpeg4")
    assert ex.audio_mode == "none"
    pts, w, h, meta = _read_video(out_path)
    assert (w, h) == (768, 432)
    assert len(pts) == len(frames) == 30
    expected = [p - frames[0][1] for _, p in frames]  # relative to the range start
    assert max(abs(a - b) for a, b in zip(pts, expected, strict=True)) <= float(tb)
    assert "FrameLens 0.1.0; model yolox-nano (sha256 0123456789ab)" in meta["comment"]
    assert "conf 0.25; iou 0.45" in meta["comment"]
    assert meta["framelens_model_sha256"] == META["model_sha256"]
    assert _leftovers(tmp_path) == ["annotated.mp4"]


@pytest.mark.parametrize("ext", ["mkv", "mov", "avi"])
def test_video_other_containers(tmp_path: Path, sample_frames: Any, ext: str) -> None:
    frames, _ = sample_frames
    out_path = tmp_path / f"out.{ext}"
    with VideoExporter(
        out_path, width=768, height=432, fps=10.0, metadata=provenance_metadata(META)
    ) as ex:
        for img, pts in frames[:10]:
            ex.write(img, pts)
    pts, w, h, meta = _read_video(out_path)
    assert (w, h, len(pts)) == (768, 432, 10)
    assert meta["comment"].startswith("FrameLens")
    if ext != "avi":  # FFmpeg's AVI reader shifts H.264 by one frame; counts still match
        assert max(abs(a - i * 0.1) for i, a in enumerate(pts)) < 1e-3
    if ext == "mkv":
        assert meta["framelens_precision"] == "fp32"


def test_video_fractional_fps_source(tmp_path: Path) -> None:
    if not BOTTLE.exists():
        pytest.skip("test clip missing")
    frames, tb = _decode(BOTTLE, 0, 20)
    out_path = tmp_path / "bottle.mp4"
    with VideoExporter(out_path, width=640, height=360, fps=179 / 6, time_base_hint=tb) as ex:
        for img, pts in frames:
            ex.write(img, pts)
    pts, w, h, _ = _read_video(out_path)
    assert (w, h, len(pts)) == (640, 360, 20)
    assert max(abs(a - b) for a, (_, b) in zip(pts, frames, strict=True)) <= float(tb)


def test_video_odd_size_kept(tmp_path: Path) -> None:
    out_path = tmp_path / "odd.mp4"
    with VideoExporter(out_path, width=101, height=57, fps=25) as ex:
        for i in range(5):
            ex.write(np.full((57, 101, 3), i * 40, np.uint8), i / 25)
    pts, w, h, _ = _read_video(out_path)
    assert (w, h, len(pts)) == (101, 57, 5)


def test_video_mpeg4_fallback_encoder(tmp_path: Path) -> None:
    out_path = tmp_path / "m4.mp4"
    with VideoExporter(out_path, width=160, height=96, fps=10, encoder="mpeg4") as ex:
        for i in range(5):
            ex.write(np.full((96, 160, 3), i * 40, np.uint8), i / 10)
    assert ex.encoder_name == "mpeg4"
    pts, w, h, _ = _read_video(out_path)
    assert (w, h, len(pts)) == (160, 96, 5)
    assert max(abs(a - i / 10) for i, a in enumerate(pts)) < 1e-3


def test_video_repeated_timestamps_stay_increasing(tmp_path: Path) -> None:
    out_path = tmp_path / "rep.mkv"
    with VideoExporter(out_path, width=64, height=64, fps=10) as ex:
        for t in (0.0, 0.1, 0.1, 0.3):
            ex.write(np.zeros((64, 64, 3), np.uint8), t)
    pts, *_ = _read_video(out_path)
    assert len(pts) == 4
    assert all(b > a for a, b in itertools.pairwise(pts))


def test_video_audio_range_copied(tmp_path: Path) -> None:
    src = tmp_path / "clip.mp4"
    _make_clip(src)
    frames, _ = _decode(src, 25, 25)  # 1.0 s .. 2.0 s
    out_path = tmp_path / "with_audio.mp4"
    with VideoExporter(
        out_path, width=160, height=96, fps=25, audio_source=str(src),
        audio_start_s=1.0, audio_end_s=2.0,
    ) as ex:  # fmt: skip
        for img, pts in frames:
            ex.write(img, pts)
    assert ex.audio_mode == "copy"
    seconds = _audio_seconds(out_path)
    assert seconds is not None and abs(seconds - 1.0) < 0.1
    with av.open(str(out_path)) as c:
        assert c.streams.audio[0].codec_context.name == "aac"
        first = next(p for p in c.demux(audio=0) if p.pts is not None)
        assert float(first.pts * first.time_base) < 0.05  # shifted to the range start


def test_video_audio_to_end_of_video_when_no_end(tmp_path: Path) -> None:
    src = tmp_path / "clip.mkv"
    _make_clip(src)
    frames, _ = _decode(src, 0, 50)  # 2.0 s of a 3.0 s clip
    out_path = tmp_path / "a.mkv"
    with VideoExporter(out_path, width=160, height=96, fps=25, audio_source=str(src)) as ex:
        for img, pts in frames:
            ex.write(img, pts)
    seconds = _audio_seconds(out_path)
    assert seconds is not None and abs(seconds - 2.0) < 0.1


def test_video_audio_transcoded_when_container_refuses_codec(tmp_path: Path) -> None:
    src = tmp_path / "mulaw.mov"  # mp4 cannot carry G.711 mu-law
    _make_clip(src, acodec="pcm_mulaw", rate=8000, layout="mono", sample_fmt="s16")
    frames, _ = _decode(src, 0, 50)
    out_path = tmp_path / "t.mp4"
    with VideoExporter(out_path, width=160, height=96, fps=25, audio_source=str(src)) as ex:
        for img, pts in frames:
            ex.write(img, pts)
    assert ex.audio_mode == "aac"
    seconds = _audio_seconds(out_path)
    assert seconds is not None and abs(seconds - 2.0) < 0.15


def test_video_source_without_audio_has_no_audio_stream(tmp_path: Path, sample_frames: Any) -> None:
    frames, _ = sample_frames
    out_path = tmp_path / "na.mp4"
    with VideoExporter(
        out_path, width=768, height=432, fps=10, audio_source=str(SAMPLE), audio_start_s=2.0
    ) as ex:
        for img, pts in frames[:3]:
            ex.write(img, pts)
    assert ex.audio_mode == "none"
    assert _audio_seconds(out_path) is None


def test_video_unwritable_paths_fail_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="does not exist"):
        VideoExporter(tmp_path / "nope" / "x.mp4", width=64, height=64, fps=10)
    if Path("/sys").is_dir() and not os.access("/sys", os.W_OK):  # pragma: no branch
        with pytest.raises(ExportError, match=r"^cannot write /sys/"):
            VideoExporter("/sys/framelens-test.mp4", width=64, height=64, fps=10)
    assert _leftovers(tmp_path) == []


def test_video_read_only_dir(unwritable_dir: Path) -> None:
    with pytest.raises(ExportError, match="permission denied"):
        VideoExporter(unwritable_dir / "x.mp4", width=64, height=64, fps=10)
    assert _leftovers(unwritable_dir) == []


def test_video_unknown_extension_and_encoder(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="unknown video extension"):
        VideoExporter(tmp_path / "x.gif", width=64, height=64, fps=10)
    with pytest.raises(ExportError, match="no usable encoder"):
        VideoExporter(tmp_path / "x.mp4", width=64, height=64, fps=10, encoder="no_such_enc")
    assert _leftovers(tmp_path) == []


def test_video_exception_mid_export_leaves_nothing(tmp_path: Path, sample_frames: Any) -> None:
    frames, _ = sample_frames
    target = tmp_path / "x.mp4"
    with pytest.raises(RuntimeError), VideoExporter(target, width=768, height=432, fps=10) as ex:
        for i, (img, pts) in enumerate(frames):
            ex.write(img, pts)
            if i == 5:
                raise RuntimeError("user pressed stop")
    assert _leftovers(tmp_path) == []


def test_video_wrong_frame_size_abort_and_empty(tmp_path: Path) -> None:
    ex = VideoExporter(tmp_path / "x.mp4", width=64, height=64, fps=10)
    with pytest.raises(ExportError, match="does not match"):
        ex.write(np.zeros((32, 64, 3), np.uint8), 0.0)
    ex.abort()
    ex.abort()  # idempotent
    assert _leftovers(tmp_path) == []

    empty = VideoExporter(tmp_path / "y.mp4", width=64, height=64, fps=10)
    with pytest.raises(ExportError, match="no frames"):
        empty.close()
    assert _leftovers(tmp_path) == []


def test_video_forgotten_exporter_leaves_no_partial(tmp_path: Path) -> None:
    ex = VideoExporter(tmp_path / "x.mp4", width=64, height=64, fps=10)
    ex.write(np.zeros((64, 64, 3), np.uint8), 0.0)
    del ex
    assert _leftovers(tmp_path) == []


# -- detections --------------------------------------------------------------------------


def _faces(n: int) -> Detections:
    lm = np.tile(
        np.array([[10, 10], [20, 10], [15, 15], [11, 20], [19, 20]], np.float32), (n, 1, 1)
    )
    return Detections(
        np.tile(np.array([[5, 5, 25, 25]], np.float32), (n, 1)),
        np.full(n, 0.9, np.float32),
        np.zeros(n, np.int32),
        lm,
    )


def _objects() -> Detections:
    return Detections(
        np.array([[-5.0, 10.123, 100.456, 500.0], [10, 20, 30, 40]], np.float32),
        np.array([0.8765, 0.5], np.float32),
        np.array([0, 42], np.int32),
    )


def test_detections_json_schema(tmp_path: Path) -> None:
    path = tmp_path / "dets.json"
    with DetectionsWriter(path, META, LABELS) as w:
        w.add(20, 2.0, _objects())
        w.add(21, 2.1, Detections.empty())
        w.add(22, 2.2, _objects().select(np.array([1])))
    data = load_detections_json(path)
    assert list(data) == ["source", "model", "precision", "backend", "meta", "frames"]
    for key in ("source", "model", "precision", "backend"):
        assert data[key] == META[key]
    assert list(data["meta"]) == list(META)  # exactly the documented keys, in order
    assert data["meta"]["conf"] == 0.25 and data["meta"]["width"] == 768
    assert [f["index"] for f in data["frames"]] == [20, 21, 22]
    assert [f["pts"] for f in data["frames"]] == [2.0, 2.1, 2.2]
    assert data["frames"][1]["detections"] == []
    first = data["frames"][0]["detections"]
    assert first[0] == {
        "box": [0.0, 10.12, 100.46, 432.0],  # clipped to the frame, 2 decimals
        "score": 0.8765,
        "class_id": 0,
        "label": "person",
    }
    assert first[1]["label"] == "42"  # unknown id -> its number
    for det in first:
        assert all(isinstance(v, float) for v in det["box"])
        assert isinstance(det["score"], float) and isinstance(det["class_id"], int)
    assert _leftovers(tmp_path) == ["dets.json"]


def test_detections_json_faces_have_landmarks(tmp_path: Path) -> None:
    path = tmp_path / "faces.json"
    with DetectionsWriter(path, META, ["face"]) as w:
        w.add(0, 0.0, _faces(2))
        w.add(1, 0.1, Detections.empty(with_landmarks=True))
    data = json.loads(path.read_text())
    det = data["frames"][0]["detections"][0]
    assert det["landmarks"] == [
        [10.0, 10.0],
        [20.0, 10.0],
        [15.0, 15.0],
        [11.0, 20.0],
        [19.0, 20.0],
    ]
    assert data["frames"][1]["detections"] == []


def test_detections_json_no_frames_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "none.json"
    DetectionsWriter(path, {"model": "m"}, LABELS).close()
    data = load_detections_json(path)
    assert data["frames"] == [] and data["meta"]["model"] == "m" and data["meta"]["iou"] is None


def test_detections_csv(tmp_path: Path) -> None:
    path = tmp_path / "dets.csv"
    with DetectionsWriter(path, META, LABELS) as w:
        w.add(20, 2.0, _objects())
        w.add(21, 2.1, Detections.empty())
    rows = list(csv.reader(path.open()))
    assert rows[0] == ["index", "pts", "class_id", "label", "score", "x1", "y1", "x2", "y2"]
    assert rows[1] == ["20", "2.0", "0", "person", "0.8765", "0.0", "10.12", "100.46", "432.0"]
    assert rows[2][:4] == ["20", "2.0", "42", "42"]
    assert len(rows) == 3  # one row per detection; the empty frame has none


def test_detections_csv_faces_landmark_columns(tmp_path: Path) -> None:
    path = tmp_path / "faces.csv"
    with DetectionsWriter(path, META, ["face"]) as w:
        w.add(0, 0.0, _faces(1))
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == 1
    assert (rows[0]["lm0_x"], rows[0]["lm4_y"]) == ("10.0", "20.0")


def test_detections_bad_extension_and_abort(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"\.json or \.csv"):
        DetectionsWriter(tmp_path / "d.txt", META, LABELS)
    with pytest.raises(ExportError, match="does not exist"):
        DetectionsWriter(tmp_path / "no" / "d.json", META, LABELS)
    with pytest.raises(ValueError), DetectionsWriter(tmp_path / "d.json", META, LABELS) as w:
        w.add(0, 0.0, _objects())
        raise ValueError("stop")
    assert _leftovers(tmp_path) == []


def test_load_detections_json_rejects_other_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "ours"}')
    with pytest.raises(ExportError):
        load_detections_json(bad)
    with pytest.raises(ExportError):
        load_detections_json(tmp_path / "missing.json")


# -- snapshot ----------------------------------------------------------------------------


def test_snapshot_png_round_trip(tmp_path: Path) -> None:
    img = np.random.default_rng(1).integers(0, 256, (48, 64, 3), dtype=np.uint8)
    written = save_snapshot(img, tmp_path / "snap.png")
    assert written == tmp_path / "snap.png"
    back = cv2.imread(str(written), cv2.IMREAD_UNCHANGED)
    assert np.array_equal(back, img)
    assert _leftovers(tmp_path) == ["snap.png"]


def test_snapshot_errors(tmp_path: Path) -> None:
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(ExportError, match=r"\.png"):
        save_snapshot(img, tmp_path / "snap.jpg")
    with pytest.raises(ExportError, match="does not exist"):
        save_snapshot(img, tmp_path / "no" / "snap.png")
    assert _leftovers(tmp_path) == []


def test_snapshot_read_only_dir(unwritable_dir: Path) -> None:
    with pytest.raises(ExportError, match="permission denied"):
        save_snapshot(np.zeros((8, 8, 3), np.uint8), unwritable_dir / "s.png")


def test_close_after_abort_is_an_error(tmp_path: Path) -> None:
    ex = VideoExporter(tmp_path / "x.mp4", width=64, height=64, fps=10)
    ex.write(np.zeros((64, 64, 3), np.uint8), 0.0)
    ex.abort()
    with pytest.raises(ExportError, match="aborted"):
        ex.close()
    w = DetectionsWriter(tmp_path / "d.json", META, LABELS)
    w.abort()
    with pytest.raises(ExportError, match="aborted"):
        w.close()
    assert _leftovers(tmp_path) == []


def test_close_twice_returns_path(tmp_path: Path) -> None:
    ex = VideoExporter(tmp_path / "x.mkv", width=64, height=64, fps=10)
    ex.write(np.zeros((64, 64, 3), np.uint8), 0.0)
    assert ex.close() == ex.close() == tmp_path / "x.mkv"
