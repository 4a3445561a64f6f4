"""Persistent user settings (QSettings, organisation and application "FrameLens")."""

from __future__ import annotations

from framelens.core.api import WALL_PROCESS_CHOICES
from PySide6.QtCore import QByteArray, QSettings

ORGANISATION = "FrameLens"
APPLICATION = "FrameLens"
MAX_RECENT = 10


def _to_bool(value: object, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):  # INI files give strings back
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


class Settings:
    """Typed access to what FrameLens remembers between sessions.

    Tests pass their own QSettings (an INI file in a temporary folder) so the
    user's settings are never touched.
    """

    def __init__(self, store: QSettings | None = None) -> None:
        self.store = store if store is not None else QSettings(ORGANISATION, APPLICATION)

    def _float(self, key: str, default: float) -> float:
        try:
            return float(self.store.value(key, default))  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return default

    def _str(self, key: str, default: str) -> str:
        value = self.store.value(key, default)
        return value if isinstance(value, str) else default

    def _bool(self, key: str, default: bool) -> bool:
        return _to_bool(self.store.value(key), default)

    def _bytes(self, key: str) -> QByteArray | None:
        value = self.store.value(key)
        return value if isinstance(value, QByteArray) else None

    # ---- window --------------------------------------------------------------
    @property
    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    @geometry.setter
    def geometry(self, value: QByteArray) -> None:
        self.store.setValue("window/geometry", value)

    @property
    def window_state(self) -> QByteArray | None:
        return self._bytes("window/state")

    @window_state.setter
    def window_state(self, value: QByteArray) -> None:
        self.store.setValue("window/state", value)

    @property
    def detections_visible(self) -> bool:
        """View > Detections: the detections list of the frame on screen is shown."""
        return self._bool("window/detections", False)

    @detections_visible.setter
    def detections_visible(self, value: bool) -> None:
        self.store.setValue("window/detections", bool(value))

    # ---- model and thresholds --------------------------------------------------
    @property
    def model(self) -> str:
        return self._str("model/name", "")

    @model.setter
    def model(self, value: str) -> None:
        self.store.setValue("model/name", value)

    def model_options(self) -> tuple[str | None, str | None, str | None]:
        """(layout, labels file, task) saved with an imported model; None = auto."""
        keys = ("model/layout", "model/labels", "model/task")
        return tuple(self._str(k, "") or None for k in keys)  # type: ignore[return-value]

    def set_model_options(
        self, layout: str | None, labels_file: str | None, task: str | None
    ) -> None:
        for key, value in zip(
            ("layout", "labels", "task"), (layout, labels_file, task), strict=True
        ):
            self.store.setValue(f"model/{key}", value or "")

    @property
    def conf(self) -> float:
        return self._float("model/conf", 0.25)

    @conf.setter
    def conf(self, value: float) -> None:
        self.store.setValue("model/conf", float(value))

    @property
    def iou(self) -> float:
        return self._float("model/iou", 0.45)

    @iou.setter
    def iou(self, value: float) -> None:
        self.store.setValue("model/iou", float(value))

    @property
    def backend(self) -> str:
        return self._str("engine/backend", "onnxruntime")

    @backend.setter
    def backend(self, value: str) -> None:
        self.store.setValue("engine/backend", value)

    @property
    def device(self) -> str:
        return self._str("engine/device", "auto")

    @device.setter
    def device(self, value: str) -> None:
        self.store.setValue("engine/device", value)

    @property
    def precision(self) -> str:
        """The precision chosen last ("fp32", "fp16" or "int8"); restored when available."""
        value = self._str("engine/precision", "fp32").strip().lower()
        return value if value in ("fp32", "fp16", "int8") else "fp32"

    @precision.setter
    def precision(self, value: str) -> None:
        self.store.setValue("engine/precision", value)

    def overlay(self, name: str) -> bool:
        return self._bool(f"overlay/{name}", name != "heatmap")  # the heatmap: asked for

    def set_overlay(self, name: str, value: bool) -> None:
        self.store.setValue(f"overlay/{name}", bool(value))

    # ---- tracking (the Tracking menu) -------------------------------------------
    @property
    def heatmap_mode(self) -> str:
        """Tracking > Heatmap Fades: "decay", else "accumulate"."""
        return "decay" if self._str("tracking/heatmap_mode", "") == "decay" else "accumulate"

    @heatmap_mode.setter
    def heatmap_mode(self, value: str) -> None:
        self.store.setValue("tracking/heatmap_mode", value)

    @property
    def tracker(self) -> str:
        """The tracker chosen last: "off", "bytetrack", "ocsort" or "botsort"."""
        value = self._str("tracking/tracker", "off").strip().lower()
        return value if value in ("off", "bytetrack", "ocsort", "botsort") else "off"

    @tracker.setter
    def tracker(self, value: str) -> None:
        self.store.setValue("tracking/tracker", value)

    @property
    def track_list_visible(self) -> bool:
        """View > Track List: the dock of the video's tracks is shown."""
        return self._bool("window/track_list", False)

    @track_list_visible.setter
    def track_list_visible(self, value: bool) -> None:
        self.store.setValue("window/track_list", bool(value))

    @property
    def events_visible(self) -> bool:
        """Zones > Events: the dock of the counts plot and the events list is shown."""
        return self._bool("window/events", False)

    @events_visible.setter
    def events_visible(self, value: bool) -> None:
        self.store.setValue("window/events", bool(value))

    # ---- playback --------------------------------------------------------------
    @property
    def speed(self) -> float:
        return self._float("playback/speed", 1.0)

    @speed.setter
    def speed(self, value: float) -> None:
        self.store.setValue("playback/speed", float(value))

    @property
    def realtime(self) -> bool:
        return self._bool("playback/realtime", True)

    @realtime.setter
    def realtime(self, value: bool) -> None:
        self.store.setValue("playback/realtime", bool(value))

    # ---- video wall ------------------------------------------------------------
    @property
    def wall_layout(self) -> str:
        """The wall's grid: "1", "2x2", "3x3", "4x4" or "auto" (by the number of sources)."""
        value = self._str("wall/layout", "auto")
        return value if value in ("1", "2x2", "3x3", "4x4", "auto") else "auto"

    @wall_layout.setter
    def wall_layout(self, value: str) -> None:
        self.store.setValue("wall/layout", value)

    @property
    def wall_process(self) -> str:
        """Where the wall's decode and inference run (core's WALL_PROCESS_CHOICES):
        "auto" (a process of their own on a GPU), "own" or "this" (the window's)."""
        value = self._str("wall/process", "auto")
        return value if value in WALL_PROCESS_CHOICES else "auto"

    @wall_process.setter
    def wall_process(self, value: str) -> None:
        self.store.setValue("wall/process", value if value in WALL_PROCESS_CHOICES else "auto")

    # ---- batch analysis (File > Batch Analysis…) ---------------------------------
    @property
    def batch_output(self) -> str:
        """The output folder of the last batch (the results browser opens it too)."""
        return self._str("batch/output", "")

    @batch_output.setter
    def batch_output(self, value: str) -> None:
        self.store.setValue("batch/output", value)

    @property
    def batch_run_mode(self) -> str:
        """Where a batch runs: "process" (this process), "ray-local" or "ray-cluster"."""
        value = self._str("batch/run_mode", "process")
        return value if value in ("process", "ray-local", "ray-cluster") else "process"

    @batch_run_mode.setter
    def batch_run_mode(self, value: str) -> None:
        self.store.setValue("batch/run_mode", value)

    @property
    def batch_address(self) -> str:
        """The Ray cluster's address for "ray-cluster" (ray://host:10001, say)."""
        return self._str("batch/address", "")

    @batch_address.setter
    def batch_address(self, value: str) -> None:
        self.store.setValue("batch/address", value)

    @property
    def batch_export_video(self) -> bool:
        return self._bool("batch/export_video", False)

    @batch_export_video.setter
    def batch_export_video(self, value: bool) -> None:
        self.store.setValue("batch/export_video", bool(value))

    # ---- super-resolution views and enlarged detections ------------------------
    @property
    def sr_mode(self) -> str:
        """The super-resolution view (gui/superres/sr_canvas.py MODES)."""
        return self._str("superres/view", "upscaled")

    @sr_mode.setter
    def sr_mode(self, value: str) -> None:
        self.store.setValue("superres/view", value)

    @property
    def sr_divider(self) -> float:
        """The wipe's divider, a fraction of the canvas's width."""
        return min(1.0, max(0.0, self._float("superres/divider", 0.5)))

    @sr_divider.setter
    def sr_divider(self, value: float) -> None:
        self.store.setValue("superres/divider", float(value))

    @property
    def sr_lens_zoom(self) -> int:
        return int(self._float("superres/lens_zoom", 4))

    @sr_lens_zoom.setter
    def sr_lens_zoom(self, value: int) -> None:
        self.store.setValue("superres/lens_zoom", int(value))

    @property
    def sr_original_filter(self) -> str:
        """How the original is enlarged for comparison: "bicubic" or "nearest"."""
        value = self._str("superres/original", "bicubic")
        return value if value in ("bicubic", "nearest") else "bicubic"

    @sr_original_filter.setter
    def sr_original_filter(self, value: str) -> None:
        self.store.setValue("superres/original", value)

    @property
    def crops_enabled(self) -> bool:
        return self._bool("crops/enabled", False)

    @crops_enabled.setter
    def crops_enabled(self, value: bool) -> None:
        self.store.setValue("crops/enabled", bool(value))

    @property
    def crops_model(self) -> str:
        return self._str("crops/model", "espcn-x2")

    @crops_model.setter
    def crops_model(self, value: str) -> None:
        self.store.setValue("crops/model", value)

    @property
    def crops_classes(self) -> list[str]:
        """Class names whose boxes are enlarged."""
        value = self.store.value("crops/classes", ["person", "face"])
        if isinstance(value, str):  # QSettings returns a lone string for one item
            value = [value]
        return [str(v) for v in value] if isinstance(value, list) else ["person", "face"]

    @crops_classes.setter
    def crops_classes(self, value: list[str]) -> None:
        self.store.setValue("crops/classes", list(value))

    # ---- recent sources --------------------------------------------------------
    @property
    def recent(self) -> list[str]:
        value = self.store.value("sources/recent", [])
        if isinstance(value, str):  # QSettings returns a lone string for one item
            value = [value]
        return [str(v) for v in value][:MAX_RECENT] if isinstance(value, list) else []

    def add_recent(self, spec: str) -> list[str]:
        items = [spec, *[r for r in self.recent if r != spec]][:MAX_RECENT]
        self.store.setValue("sources/recent", items)
        return items

    def clear_recent(self) -> None:
        self.store.setValue("sources/recent", [])

    @property
    def last_dir(self) -> str:
        return self._str("sources/last_dir", "")

    @last_dir.setter
    def last_dir(self, value: str) -> None:
        self.store.setValue("sources/last_dir", value)

    @property
    def snapshot_dir(self) -> str:
        """The folder the last snapshot was saved in ("" before the first)."""
        return self._str("sources/snapshot_dir", "")

    @snapshot_dir.setter
    def snapshot_dir(self, value: str) -> None:
        self.store.setValue("sources/snapshot_dir", value)

    def sync(self) -> None:
        self.store.sync()
