"""Tracks in what a run keeps: ``framelens run --track`` on real clips of the person
sample through the real YOLOX-Nano and the real trackers, its MOT Challenge text, its
detections JSON and its summary; several sources and the wall, each source with tracks of
its own, equal to single runs of the same clips; the options' bad combinations."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from framelens.cli import main
from framelens.core.models.catalog import DEFAULT_MODEL, DEFAULT_SUPERRES_MODEL, resolve_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.runs import run_many, run_to_outputs
from framelens.core.sessions.tracks import TrackStages
from framelens.core.sessions.wall import WallPlayer, WallState
from framelens.core.stages.source_stages import SourceStage, StageFactory
from framelens.core.stages.tracking.settings import TrackerSettings
from framelens.core.types import Detections, FrameResult
from media_factory import sample_clips

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4"
FRAMES = 24
STARTS = (290, 320, 600, 640)

MotRow = tuple[int, int, tuple[float, float, float, float]]  # frame, id, (l, t, w, h)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Four clips of the sample with people walking (10 fps)."""
    return sample_clips(tmp_path_factory.mktemp("track_clips"), SAMPLE, STARTS, FRAMES)


@pytest.fixture(scope="module")
def settings() -> PipelineSettings:
    return PipelineSettings(resolve_model(DEFAULT_MODEL), threads=1)


def mot_rows(path: Path) -> list[MotRow]:
    """A MOT Challenge text file's rows: 1-based frame, ID, box; the last four fields as
    the format says (conf, then -1 three times)."""
    rows = []
    for line in path.read_text().splitlines():
        fields = line.split(",")
        assert len(fields) == 10 and fields[7:] == ["-1", "-1", "-1"], line
        left, top, width, height = (float(v) for v in fields[2:6])
        rows.append((int(fields[0]), int(fields[1]), (left, top, width, height)))
    return rows


def tracked_boxes(detections_json: Path) -> list[MotRow]:
    """The detections JSON's boxes with a track (``track_id`` >= 1), as MOT rows."""
    rows = []
    for frame in json.loads(detections_json.read_text())["frames"]:
        for det in frame["detections"]:
            if det["track_id"] >= 1:
                x1, y1, x2, y2 = det["box"]
                box = (x1, y1, round(x2 - x1, 2), round(y2 - y1, 2))
                rows.append((frame["index"] + 1, det["track_id"], box))
    return rows


def clipped(rows: list[MotRow], width: int = 768, height: int = 432) -> list[MotRow]:
    """MOT rows with their boxes clipped to the frame, as the detections JSON keeps them
    (MOT text keeps the tracker's box as it is, past the frame's edge too)."""
    out = []
    for frame, track, (left, top, w, h) in rows:
        x1, y1 = min(max(left, 0.0), width), min(max(top, 0.0), height)
        x2, y2 = min(max(left + w, 0.0), width), min(max(top + h, 0.0), height)
        out.append((frame, track, (x1, y1, round(x2 - x1, 2), round(y2 - y1, 2))))
    return out


def same_rows(a: list[MotRow], b: list[MotRow]) -> bool:
    """Equal frames and IDs, boxes to the 2 decimals both files round to."""
    return len(a) == len(b) and all(
        fa == fb and ia == ib and all(abs(x - y) <= 0.021 for x, y in zip(ba, bb, strict=True))
        for (fa, ia, ba), (fb, ib, bb) in zip(sorted(a), sorted(b), strict=True)
    )


def test_run_track_writes_mot_text_track_ids_in_the_json_and_says_the_tracker(
    clips: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tracks, dets = tmp_path / "tracks.txt", tmp_path / "dets.json"
    code = main(["run", clips[0], "--threads", "1", "--quiet", "-v", "--track",
                 "--export-tracks", str(tracks), "--detections", str(dets)])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "framelens: tracker: bytetrack (" in err and "track_buffer 30" in err
    rows = mot_rows(tracks)
    ids = {track for _, track, _ in rows}
    assert rows and min(ids) == 1  # the people in view were followed, numbered from 1
    assert {frame for frame, _, _ in rows} <= set(range(1, FRAMES + 1))
    # a person followed through the clip keeps one ID over most of its frames
    longest = max(sum(1 for _, t, _ in rows if t == track) for track in ids)
    assert longest >= FRAMES // 2
    # the detections JSON carries the same IDs on the same boxes
    assert same_rows(tracked_boxes(dets), clipped(rows))
    summary = json.loads(out)
    assert summary["tracker"]["kind"] == "bytetrack"
    assert summary["tracker"]["match_iou"] == TrackerSettings().match_iou
    assert summary["tracker"]["trail_length"] == 0  # nothing drawn: no trails kept
    assert summary["sources"][0]["tracks"] == len(ids)
    assert str(tracks) in summary["outputs"] and str(dets) in summary["outputs"]
    # the tracker is a stage of the run's timings, beside the pipeline's own
    assert 0 < summary["stage_ms"]["track"] < summary["stage_ms"]["inference"]


def test_run_without_track_says_no_tracker_and_writes_no_track_ids(
    clips: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dets = tmp_path / "dets.json"
    assert main(["run", clips[0], "--threads", "1", "--quiet", "--frames", "3",
                 "--detections", str(dets)]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert "tracker" not in summary and "tracks" not in summary["sources"][0]
    assert "track" not in summary["stage_ms"] and "inference" in summary["stage_ms"]
    frames = json.loads(dets.read_text())["frames"]
    assert all("track_id" not in det for f in frames for det in f["detections"])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--export-tracks", "t.txt"], "--export-tracks writes a tracker's tracks: add --track"),
        (["--track-buffer", "60"], "--track-buffer: options of the tracker: add --track"),
        (["--track", "--match-iou", "1.5"], "tracker parameters: match IoUs must be between"),
        (["--track", "--low-threshold", "0.7", "--high-threshold", "0.6"],
         "tracker parameters: tracker thresholds"),
        (["--track", "ocsort", "--cmc", "ecc"], "--cmc: BoT-SORT's camera-motion compensation"),
        (["--track", "--ocsort-inertia", "0.5", "--ocsort-use-byte"],
         "--ocsort-inertia, --ocsort-use-byte: OC-SORT's parameters: add --track ocsort"),
        (["--track", "--export-tracks"], "--export-tracks needs a file for one source"),
        (["--track", "--model", DEFAULT_SUPERRES_MODEL], "--track follows detected objects"),
        (["CLIP2", "--export-dir", "OUT", "--track", "--export-tracks", "t.txt"],
         "several sources: --export-tracks writes DIR/<name>.tracks.txt for each source"),
    ],
)  # fmt: skip
def test_bad_tracking_options_are_refused_in_one_line_and_nothing_is_written(
    clips: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    args: list[str], says: str,
) -> None:  # fmt: skip
    args = [clips[1] if a == "CLIP2" else str(tmp_path / "o") if a == "OUT" else a for a in args]
    args = [str(tmp_path / a) if a.endswith(".txt") else a for a in args]
    assert main(["run", clips[0], *args, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says in err, err
    assert list(tmp_path.iterdir()) == []


def test_the_annotated_export_runs_with_tracking(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """``--export`` with ``--track``: the overlay is drawn after the tracker (the IDs are
    the overlay's to draw), every frame written, the tracks beside it."""
    import av

    video, tracks = tmp_path / "ids.mp4", tmp_path / "tracks.txt"
    summary = run_to_outputs(clips[0], settings, export=str(video), frames=6,
                             tracker=TrackerSettings(), tracks=str(tracks))  # fmt: skip
    assert set(summary.outputs) == {str(tracks), str(video)}
    assert summary.tracker is not None  # a video drawn: trails kept for the overlay
    assert summary.tracker["trail_length"] == TrackerSettings().trail_length > 0
    with av.open(str(video)) as container:
        assert sum(1 for _ in container.decode(video=0)) == 6
    assert {frame for frame, _, _ in mot_rows(tracks)} <= set(range(1, 7))


def test_bare_track_before_the_source_is_the_default_tracker(
    clips: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--track", clips[0], "--threads", "1", "--quiet", "--frames", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["tracker"]["kind"] == "bytetrack"


def test_four_sources_each_keep_tracks_of_their_own_equal_to_four_single_runs(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """The same IDs on the same boxes, source by source: one source's tracks never meet
    another's, and batching four sources' frames into one engine call changes nothing."""
    tracker = TrackerSettings()
    summary = run_many(clips, settings, str(tmp_path / "four"), videos=False, tracker=tracker,
                       tracks=True)  # fmt: skip
    assert summary.mean_batch > 1 and summary.tracker is not None
    for n, clip in enumerate(clips):
        alone = tmp_path / f"alone{n}.txt"
        single = run_to_outputs(clip, settings, tracker=tracker, tracks=str(alone))
        together = mot_rows(tmp_path / "four" / f"clip{n}.tracks.txt")
        assert together and min(t for _, t, _ in together) == 1  # numbered from 1 per source
        assert same_rows(together, mot_rows(alone)), f"source {n}"
        assert summary.sources[n].tracks == single.sources[0].tracks
        assert same_rows(tracked_boxes(tmp_path / "four" / f"clip{n}.json"), clipped(together))


def test_sources_in_processes_of_their_own_keep_the_tracks_of_single_runs(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """Two device slots, each in a process (``--processes``): the trackers travel with
    the run (pickled) and each source's tracks come back, in its MOT file and the
    summary, as a single run makes them."""
    tracker = TrackerSettings()
    summary = run_many(clips[:2], settings, str(tmp_path / "two"), devices=["cpu", "cpu"],
                       processes=True, videos=False, tracker=tracker, tracks=True)  # fmt: skip
    assert len(summary.devices) == 2
    for n, clip in enumerate(clips[:2]):
        alone = tmp_path / f"alone{n}.txt"
        single = run_to_outputs(clip, settings, tracker=tracker, tracks=str(alone))
        assert same_rows(mot_rows(tmp_path / "two" / f"clip{n}.tracks.txt"), mot_rows(alone))
        assert summary.sources[n].tracks == single.sources[0].tracks >= 1


RATES: list[tuple[int, float]] = []  # (source, frame rate) each tracker was made with


def recording_tracker(settings: TrackerSettings) -> StageFactory:
    """The real tracking stages, noting the frame rate each source's tracker got."""
    from framelens.core.stages.tracking.stage import tracking_stages

    made = tracking_stages(settings)

    def factory(source: int) -> Sequence[SourceStage]:
        RATES.append((source, settings.frame_rate))
        return made(source)

    return factory


def test_each_sources_tracker_counts_its_buffer_at_the_sources_own_frame_rate(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """A 10 fps clip and a 25 fps one in one run: each tracker is made with its own
    source's rate (the track buffer is in frames at 30 fps, scaled by it)."""
    fast = sample_clips(tmp_path, SAMPLE, (290,), 4, rate=25)[0]
    RATES.clear()
    run_many([clips[0], fast], settings, str(tmp_path / "out"), videos=False, frames=3,
             stages=TrackStages(TrackerSettings(), make=recording_tracker))  # fmt: skip
    assert sorted(RATES) == [(0, 10.0), (1, 25.0)]


def test_the_windows_tracker_counts_each_wall_tile_s_buffer_at_its_own_frame_rate(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    """The wall (and an export) take the window's tracker, chosen for the video it
    played (30 fps here): each tile's tracker is made at that tile's rate."""
    from framelens.core.sessions.playback.tracking import PlaybackTracking

    fast = sample_clips(tmp_path, SAMPLE, (290,), 4, rate=25)[0]
    window = PlaybackTracking(make=recording_tracker)
    window.stages(TrackerSettings.for_kind("bytetrack", frame_rate=30.0))
    RATES.clear()
    run_many([clips[0], fast], settings, str(tmp_path / "out"), videos=False, frames=3,
             stages=window.export_stages())  # fmt: skip
    assert sorted(RATES) == [(0, 10.0), (1, 25.0)]


@pytest.mark.parametrize(
    ("kind", "cmc", "kept"),
    [("botsort", "sparse", True), ("botsort", "ecc", True), ("botsort", "none", False),
     ("bytetrack", "sparse", False), ("ocsort", "sparse", False)],
)  # fmt: skip
def test_a_run_keeps_the_frames_pixels_only_for_botsorts_motion_compensation(
    clips: list[str], settings: PipelineSettings, kind: str, cmc: str, kept: bool
) -> None:
    """A run that writes only detections drops the frames' pixels on the GPU (never
    converted for display); BoT-SORT's camera-motion compensation looks at them, so
    the session keeps them for it, and only for it (tests/gpu checks the frames)."""
    from framelens.core.sessions.session import Session, SessionOptions

    tracker = TrackerSettings.for_kind(kind, cmc=cmc)  # type: ignore[arg-type]
    session = Session([clips[0]], settings, options=SessionOptions(draw="none", pixels=False),
                      stages=TrackStages(tracker))  # fmt: skip
    try:
        assert session.options.pixels is kept
    finally:
        session.close()


def test_the_cli_writes_each_sources_tracks_beside_its_other_outputs(
    clips: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(["run", *clips[:2], "--export-dir", str(out), "--threads", "1", "--quiet",
                 "--frames", "6", "--track", "--export-tracks"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "clip0.json", "clip0.mp4", "clip0.tracks.txt", "clip1.json", "clip1.mp4",
        "clip1.tracks.txt",
    ]  # fmt: skip
    assert [s["tracks"] for s in summary["sources"]] == [
        len({t for _, t, _ in mot_rows(out / f"clip{n}.tracks.txt")}) for n in range(2)
    ]


def test_the_wall_gives_every_tile_its_own_tracks_as_single_runs_do(
    clips: list[str], settings: PipelineSettings, tmp_path: Path
) -> None:
    tracker = TrackerSettings()
    shown: dict[int, list[MotRow]] = {}
    state = [WallState()]
    errors: list[str] = []

    def on_result(result: FrameResult) -> None:
        dets = result.output
        assert isinstance(dets, Detections) and dets.track_ids is not None
        for box, track in zip(dets.boxes.tolist(), dets.track_ids.tolist(), strict=True):
            if track >= 1:
                x1, y1, x2, y2 = (round(v, 2) for v in box)
                row = (result.frame.index + 1, track, (x1, y1, x2 - x1, y2 - y1))
                shown.setdefault(result.frame.source_id, []).append(row)

    stages = TrackStages(tracker)
    wall = WallPlayer(on_result, lambda s: state.__setitem__(0, s), errors.append,
                      realtime=False, display_depth=FRAMES, stages=stages)  # fmt: skip
    try:
        wall.open(clips[:3], settings)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            s = state[0]
            if s.status == "ended" and all(t.shown + t.dropped == t.frames for t in s.tiles):
                break
            time.sleep(0.05)
    finally:
        wall.close()
    assert not errors
    assert all(t.dropped == 0 for t in state[0].tiles)
    for n, clip in enumerate(clips[:3]):
        alone = tmp_path / f"alone{n}.txt"
        run_to_outputs(clip, settings, tracker=tracker, tracks=str(alone))
        assert same_rows(shown[n], mot_rows(alone)), f"tile {n}"
