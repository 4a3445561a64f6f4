"""The window's engine on the H200: the Qt-free Player (core.player) on CUDA.

The GUI drives exactly this object through its controller; what the H200 lacks is Qt,
so the canvas's interop is tested on its own (test_interop.py, EGL). Here: NVDEC
decoding in the player, the detections it shows, seeking that never runs the decoder's
pool dry, a GPU fault mid-playback going on on the CPU, and the switch back to CUDA.
"""

from __future__ import annotations

import faulthandler
import random
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from framelens.core.gpu.context import GpuContext
from framelens.core.models.catalog import DEFAULT_MODEL, resolve_model
from framelens.core.pipeline import build
from framelens.core.pipeline.gpu_pipeline import FAULT_ENV
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.playback.player import Player, PlayerState
from framelens.core.stages.sources import open_source
from framelens.core.stages.tasks import DetectParams
from framelens.core.stages.tasks.detect.agreement import AgreementTotals
from framelens.core.types import Detections, FrameResult, StageTimes

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
PLAYED = 200


class Shown:
    """What a canvas keeps of the player's results: the last one, and per frame index
    the detections and where the pixels were (holding every result would hold every
    display buffer, which a canvas never does)."""

    def __init__(self) -> None:
        self.indices: list[int] = []
        self.detections: dict[int, Detections] = {}
        self.device_frames = 0
        self.last: FrameResult | None = None
        self.states: list[PlayerState] = []
        self.errors: list[str] = []
        self._cond = threading.Condition()

    def on_result(self, result: FrameResult) -> None:
        with self._cond:
            index = result.frame.index
            self.indices.append(index)
            self.detections[index] = result.output
            self.device_frames += result.frame.device is not None and not result.frame.on_host
            self.last = result
            self._cond.notify_all()

    def on_state(self, state: PlayerState) -> None:
        with self._cond:
            self.states.append(state)
            self._cond.notify_all()

    def on_error(self, message: str) -> None:
        with self._cond:
            self.errors.append(message)
            self._cond.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:
        with self._cond:
            if not self._cond.wait_for(predicate, timeout):
                faulthandler.dump_traceback(all_threads=True)  # where the player is stuck
                raise AssertionError(f"timed out; errors {self.errors}, state {self.state}")

    @property
    def state(self) -> PlayerState:
        return self.states[-1] if self.states else PlayerState()

    @property
    def index(self) -> int:
        return self.last.frame.index if self.last is not None else -1


def cpu_detections(settings: PipelineSettings, frames: int) -> dict[int, Detections]:
    pipeline = build.host_pipeline(replace(settings, device="cpu"))
    source = open_source(SAMPLE)
    try:
        got = {}
        for _ in range(frames):
            frame = source.read()
            assert frame is not None
            got[frame.index] = pipeline.infer(frame, StageTimes()).output
        return got
    finally:
        pipeline.close()
        source.close()


def test_player_on_cuda_decodes_with_nvdec_shows_cpu_detections_and_survives_a_gpu_fault(
    gpu_ctx: GpuContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = PipelineSettings(
        resolve_model(DEFAULT_MODEL), device="cuda:0", params=DetectParams(conf=0.3)
    )
    shown = Shown()
    player = Player(shown.on_result, shown.on_state, shown.on_error)
    try:
        # open: the first frame, from NVDEC, through the GPU pipeline, kept on the device
        player.open(SAMPLE, settings)
        shown.wait(lambda: shown.last is not None)
        assert shown.state.decoder.startswith("nvdec"), shown.state
        assert shown.state.device == "cuda:0" and shown.errors == []
        assert shown.device_frames == 1

        # play as fast as possible: every frame in order, the CPU pipeline's detections
        player.set_realtime(False)
        player.play()
        shown.wait(lambda: shown.index >= PLAYED)
        player.pause()
        shown.wait(lambda: not shown.state.playing)
        played = shown.indices[: PLAYED + 1]
        assert played == list(range(PLAYED + 1)), played[:20]
        cpu = cpu_detections(settings, PLAYED + 1)
        totals = AgreementTotals()
        for index in range(PLAYED + 1):
            totals.add_frame(cpu[index], shown.detections[index])
        print(f"player on cuda:0, NVDEC, {PLAYED + 1} frames: {totals.as_dict()}")
        assert sum(len(d) for d in cpu.values()) > 50
        assert totals.f1 >= 0.99
        assert shown.device_frames == len(shown.indices), "a frame took a host round trip"

        # seeking while paused, many times: each shows the frame asked for; a decoder
        # buffer left behind by any of them would run NVDEC's pool (12 frames) dry
        rng = random.Random(4)
        for _ in range(40):
            target = rng.randrange(0, 1390)
            player.seek(target)
            shown.wait(lambda t=target: shown.index == t)  # type: ignore[misc]
        player.step(1)
        shown.wait(lambda t=target + 1: shown.index == t)  # type: ignore[misc]
        assert shown.errors == []

        # a GPU fault mid-playback: the player goes on on the CPU, from the same frame
        player.seek(500)
        shown.wait(lambda: shown.index == 500)
        monkeypatch.setenv(FAULT_ENV, "530")
        before = len(shown.indices)
        player.play()
        shown.wait(lambda: shown.index >= 580)
        after_fault = shown.indices[before:]
        assert after_fault[: 580 - 500] == list(range(501, 581)), "frames lost or repeated"
        assert any(m.startswith("GPU failed (frame 530") for m in shown.errors), shown.errors
        shown.wait(lambda: shown.state.device == "cpu")
        assert shown.state.decoder == "cpu" and shown.state.playing
        monkeypatch.delenv(FAULT_ENV)

        # and back to CUDA: NVDEC again, playback goes on where it was
        player.pause()
        shown.wait(lambda: not shown.state.playing)
        at = shown.index
        player.set_model(settings)
        shown.wait(lambda: shown.state.device == "cuda:0" and not shown.state.loading_model)
        assert shown.state.decoder.startswith("nvdec"), shown.state
        player.step(1)
        shown.wait(lambda: shown.index == at + 1)
        assert shown.last is not None and not shown.last.frame.on_host
    finally:
        player.close()
    errors = [m for m in shown.errors if not m.startswith("GPU failed (frame 530")]
    assert errors == [], errors


class ShownImages(Shown):
    """A canvas showing super-resolution: it keeps the last result only (an Upscaled
    holds a display buffer of the pipeline's pool, as a frame does), and per frame what
    was shown: the size and region of the upscaled image."""

    def on_result(self, result: FrameResult) -> None:
        with self._cond:
            self.indices.append(result.frame.index)
            self.device_frames += result.frame.device is not None and not result.frame.on_host
            self.device_frames -= result.output.device is None  # an upscaled frame on the host
            self.last = result
            self._cond.notify_all()


def test_player_upscales_on_the_device_and_follows_a_region_while_playing(
    gpu_ctx: GpuContext,
) -> None:
    """What the window does with an SR model on CUDA: NVDEC frames upscaled by the GPU
    pipeline, original and upscaled frames both on the device (the canvas draws them by
    interop), a region of interest applied live from a later frame."""
    from framelens.core.stages.tasks import SuperResParams, Upscaled

    spec = resolve_model("espcn-x2")
    shown = ShownImages()
    player = Player(shown.on_result, shown.on_state, shown.on_error)
    try:
        player.open(SAMPLE, PipelineSettings(spec, device="cuda:0"))
        shown.wait(lambda: shown.last is not None)
        assert shown.state.decoder.startswith("nvdec"), shown.state
        player.set_realtime(False)
        player.play()
        shown.wait(lambda: shown.index >= 30)
        last = shown.last
        assert shown.errors == [], shown.errors
        assert last is not None and isinstance(last.output, Upscaled)
        assert last.output.device is not None and last.output.size == (1536, 864)
        assert last.frame.device is not None and not last.frame.on_host
        player.update(params=SuperResParams(region=(300, 100, 128, 96)))
        shown.wait(lambda: shown.last is not None and shown.last.output.region is not None)
        out = shown.last.output
        assert out.region == (300, 100, 128, 96) and out.size == (256, 192)
        player.pause()
        assert shown.errors == []
        assert shown.device_frames == len(shown.indices), "a frame took a host round trip"
    finally:
        player.close()
