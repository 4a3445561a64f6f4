"""The main window's super-resolution parts: the views of the canvas (upscaled, wipe, side
by side, lens, region of interest), PSNR of the frame on demand, and for detectors the
"Enlarge detections" strip.

The views are chosen by View > Super-resolution View, the Super-resolution toolbar, the
panel, or Alt+1..5; the choice, the wipe's divider, the lens zoom and the original's
enlargement are saved. The region of interest goes to the pipeline (the controller's
``set_region``: only that part is upscaled, live) and its upscaled pixels are shown in
the panel beside the video.

This is the super-resolution feature's own code: the one place in the GUI that reads
the task's output type (``Upscaled``: scale, region, host or device image), in
``upscaled``; the main window's display hands it every result (``show``) and draws on
the canvas those it does not take.
"""

from __future__ import annotations

from typing import cast

import numpy as np
from framelens.core.api import (
    Detections,
    DeviceFrame,
    EnlargedCrop,
    FrameQuality,
    FrameResult,
    ModelSpec,
    PipelineSettings,
    Region,
    Upscaled,
    bicubic_upscale,
    produces_image,
)
from framelens.gui.display.gl_texture import Frame
from framelens.gui.display.image_view import ImageView
from framelens.gui.player.main_window_parts import WindowParts
from framelens.gui.superres.crop_strip import CropStrip, CropWorker
from framelens.gui.superres.sr_canvas import MODE_LABELS, MODES
from framelens.gui.superres.sr_jobs import QualityJob
from framelens.gui.superres.sr_panel import ORIGINAL_FILTERS, CropPanel, SrPanel, quality_text
from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMenu, QSplitter, QToolBar, QWidget

__all__ = ["SuperResolution"]

TIPS = {
    "upscaled": "The model's output",
    "wipe": "The original left of a divider you drag, the upscaled right of it",
    "side": "The original and the upscaled side by side, at the same zoom and pan",
    "lens": "Original and upscaled pixels under the cursor at 200-800% (wheel or +/-)",
    "roi": "Drag a rectangle: only that region is upscaled, shown beside the video",
}


class SuperResolution(QObject):
    """Views, PSNR on demand and enlarged detections (see the module doc)."""

    # ---- construction ---------------------------------------------------------------

    def __init__(self, parts: WindowParts) -> None:
        """The panel's sections and the video area (``widget``): the canvas, the region
        of interest beside it and the enlarged detections under it; the actions."""
        super().__init__(parts.window)
        self.parts = parts
        self.canvas, self.controller, self.settings = parts.canvas, parts.controller, parts.settings
        self.panel, self.show_error = parts.panel, parts.show_error
        self.last_quality: FrameQuality | None = None
        self.roi_view = ImageView("Drag a rectangle on the video: it is upscaled here")
        self.roi_view.setObjectName("roiView")
        self.crop_strip = CropStrip()
        self.crop_worker = CropWorker(parts.window)
        self.quality_job = QualityJob(parts.window)
        self.sr_panel = SrPanel()
        self.crop_panel = CropPanel()
        self.panel.add_section(self.sr_panel)
        self.panel.add_section(self.crop_panel)
        column = QSplitter(Qt.Orientation.Vertical)
        column.addWidget(self.canvas)
        column.addWidget(self.crop_strip)
        column.setStretchFactor(0, 4)
        column.setStretchFactor(1, 1)
        row = QSplitter(Qt.Orientation.Horizontal)
        row.addWidget(column)
        row.addWidget(self.roi_view)
        self.roi_view.hide()
        self.crop_strip.hide()
        self._sr_row, self._sr_column = row, column
        self.widget: QWidget = row
        self._build_actions()
        self._connect()
        self.controller.modelChanged.connect(self._sync)

    def _show_beside(self, on: bool) -> None:
        """The region of interest beside the video, a third of the width."""
        if on and not self.roi_view.isVisible():
            total = max(600, self._sr_row.width())
            self._sr_row.setSizes([total * 2 // 3, total // 3])
        self.roi_view.setVisible(on)

    def _show_below(self, on: bool) -> None:
        """The enlarged detections under the video, a third of the height."""
        if on and not self.crop_strip.isVisible():
            total = max(300, self._sr_column.height())
            self._sr_column.setSizes([total * 3 // 5, total * 2 // 5])
        self.crop_strip.setVisible(on)

    def _build_actions(self) -> None:
        group = QActionGroup(self)
        group.setExclusive(True)
        self.sr_mode_actions: dict[str, QAction] = {}
        for i, mode in enumerate(MODES):
            action = self._sr_action(
                MODE_LABELS[mode],
                lambda _checked=False, m=mode: self.choose_sr_mode(m),
                f"Alt+{i + 1}",
                TIPS[mode],
            )
            action.setCheckable(True)
            group.addAction(action)
            self.sr_mode_actions[mode] = action
        self.measure_action = self._sr_action(
            "Measure &PSNR of This Frame",
            self.measure_psnr,
            "Ctrl+M",
            "Shrink the frame by the scale, upscale it with the model and with bicubic, "
            "and measure PSNR and SSIM of both against the frame",
        )
        self.clear_region_action = self._sr_action(
            "Clear Region of Interest", self.canvas.clear_region, "Esc", "Upscale the whole frame"
        )
        self.actual_pixels_action = self._sr_action(
            "&Actual Pixels", lambda: self.canvas.set_pixel_scale(1.0), "Ctrl+Alt+0"
        )

        bar = self.sr_toolbar = QToolBar("Super-resolution")
        bar.setObjectName("superresToolBar")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextOnly)
        bar.addActions(list(self.sr_mode_actions.values()))
        bar.addSeparator()
        self.measure_action.setIconText("Measure PSNR")
        bar.addAction(self.measure_action)

    def _sr_action(self, text: str, slot: object, shortcut: str, tip: str = "") -> QAction:
        return self.parts.action(text, slot, shortcut, tip=tip)

    def add_to_menus(self, view_menu: QMenu, analysis_menu: QMenu) -> None:
        """Its submenu of View, its entries in Analysis, and its toolbar."""
        menu = view_menu.addMenu("&Super-resolution View")
        menu.addActions(list(self.sr_mode_actions.values()))
        menu.addSeparator()
        menu.addAction(self.clear_region_action)
        view_menu.addAction(self.actual_pixels_action)
        analysis_menu.addSeparator()
        analysis_menu.addAction(self.measure_action)
        self.parts.window.addToolBar(self.sr_toolbar)

    def _connect(self) -> None:
        c, s = self.canvas, self.settings
        c.modeChanged.connect(self._on_sr_mode)
        c.dividerMoved.connect(lambda f: setattr(s, "sr_divider", f))
        c.lensZoomChanged.connect(lambda z: setattr(s, "sr_lens_zoom", z))
        c.regionChanged.connect(self._on_region)
        self.sr_panel.modeChosen.connect(self.choose_sr_mode)
        self.sr_panel.filterChosen.connect(self._on_original_filter)
        self.sr_panel.measureRequested.connect(self.measure_psnr)
        self.quality_job.finished.connect(self._on_quality)
        self.quality_job.failed.connect(lambda m: self.show_error(f"PSNR: {m}"))
        self.crop_panel.enabledChanged.connect(self._on_crops_enabled)
        self.crop_panel.modelChosen.connect(self._on_crops_model)
        self.crop_panel.classesChanged.connect(
            lambda names: setattr(s, "crops_classes", sorted(names))
        )
        self.crop_worker.cropsReady.connect(self._on_crops)
        self.crop_worker.failed.connect(lambda m: self.show_error(f"Enlarge detections: {m}"))

    def restore(self) -> None:
        s, c = self.settings, self.canvas
        c.set_divider(s.sr_divider)
        c.set_lens_zoom(s.sr_lens_zoom)
        mode = s.sr_mode if s.sr_mode in MODES else "upscaled"
        c.set_mode(mode)
        self._show_sr_mode(mode)
        self.sr_panel.show_filter(s.sr_original_filter)
        upscalers = {k: v for k, v in self.controller.catalog().items() if produces_image(v)}
        self.crop_panel.set_models(upscalers, s.crops_model)
        self.crop_panel.enable_check.blockSignals(True)
        self.crop_panel.enable_check.setChecked(s.crops_enabled)
        self.crop_panel.enable_check.blockSignals(False)

    # ---- model and mode ----------------------------------------------------------------

    def _sync(self, spec: ModelSpec | None) -> None:
        """What the loaded model's task offers: the views for super-resolution, the crop
        strip for detectors (None, no model: neither)."""
        sr = spec is not None and produces_image(spec)
        for action in (*self.sr_mode_actions.values(), self.measure_action):
            action.setEnabled(sr)
        self.clear_region_action.setEnabled(sr and self.canvas.mode == "roi")
        self.sr_toolbar.setVisible(sr)
        self.sr_panel.setVisible(sr)
        self.crop_panel.setVisible(spec is not None and not sr)
        self._show_beside(sr and self.canvas.mode == "roi")
        self.sr_panel.quality_label.setText("")
        if sr:
            self._show_below(False)
            self.crop_worker.configure(None)
            self.controller.set_region(self.canvas.region if self.canvas.mode == "roi" else None)
        elif spec is not None:
            self.crop_panel.set_labels(spec.labels, self.settings.crops_classes)
            self._configure_crops()
        else:
            self._show_below(False)
            self.crop_worker.configure(None)

    def choose_sr_mode(self, mode: str) -> None:
        self.canvas.set_mode(mode)

    def _show_sr_mode(self, mode: str) -> None:
        self.sr_mode_actions[mode].setChecked(True)
        self.sr_panel.show_mode(mode)

    def _on_sr_mode(self, mode: str) -> None:
        self.settings.sr_mode = mode
        self._show_sr_mode(mode)
        sr = self.controller.superres
        self._show_beside(sr and mode == "roi")
        self.clear_region_action.setEnabled(sr and mode == "roi")
        self.controller.set_region(self.canvas.region if mode == "roi" else None)
        last = self.controller.last_result
        if last is not None:
            self.show(last)  # what is shown changes now, not at the next frame
        self.parts.status_bar.showMessage(f"View: {MODE_LABELS[mode]}", 2000)

    def _on_region(self, region: Region | None) -> None:
        if self.canvas.mode == "roi":
            self.controller.set_region(region)

    def _on_original_filter(self, key: str) -> None:
        self.settings.sr_original_filter = key
        self.sr_panel.show_filter(key)
        last = self.controller.last_result
        if last is not None:
            self.show(last)

    # ---- showing a result ----------------------------------------------------------------

    def show(self, result: FrameResult) -> bool:
        """A super-resolution result on the canvas, as the view wants it (True); False
        for any other result (the display draws it)."""
        output = upscaled(result)
        if output is None:
            return False
        self._show(result, output)
        return True

    def _show(self, result: FrameResult, output: Upscaled) -> None:
        frame, scale, mode = result.frame, output.scale, self.canvas.mode
        original: Frame = (
            frame.image
            if frame.on_host or frame.device is None
            else cast(DeviceFrame, frame.device)
        )
        settings = self.controller.settings
        name = settings.model.name if settings is not None else "model"
        if mode == "roi":
            self.canvas.set_superres(original, scale=scale)
            self._show_region(output)
            return
        if output.region is not None or output.size is None:
            return  # upscaled for the region view just left: the whole frame comes next
        main: Frame | None = (
            cast(DeviceFrame, output.device) if output.device is not None else output.image
        )
        if main is None:
            return
        reference: Frame | None = None
        uv, nearest = (0.0, 0.0, 1.0, 1.0), False
        how = self.settings.sr_original_filter
        if mode in ("wipe", "side"):
            if how == "bicubic":
                reference = bicubic_upscale(frame.image, scale)
            else:
                ow, oh = output.size
                reference = original
                uv, nearest = (0.0, 0.0, ow / scale / frame.width, oh / scale / frame.height), True
        lens = None
        if mode == "lens" and output.image is not None:
            lens = (frame.image, output.image)
        self.canvas.set_superres(
            main,
            reference,
            scale=scale,
            reference_uv=uv,
            reference_nearest=nearest,
            lens=lens,
            captions=(f"Original · {ORIGINAL_FILTERS[how].lower()}", f"{name} ×{scale}"),
        )

    def _show_region(self, output: Upscaled) -> None:
        image = output.image
        if image is None:
            return
        h, w = image.shape[:2]
        if output.region is None:
            caption = f"Whole frame → {w}×{h} · drag a rectangle on the video"
        else:
            x, y, rw, rh = output.region
            caption = f"Region {rw}×{rh} at ({x}, {y}) → {w}×{h} · ×{output.scale}"
        self.roi_view.set_image(image, caption)

    # ---- PSNR on demand ---------------------------------------------------------------

    def measure_psnr(self) -> None:
        """PSNR and SSIM of the model and of bicubic on the frame on screen (on a thread)."""
        result, settings = self.controller.last_result, self.controller.settings
        if settings is None or not produces_image(settings.model):
            self.show_error("Measuring PSNR needs a super-resolution model")
            return
        if result is None:
            self.show_error("Nothing to measure: open a video first")
            return
        if self.quality_job.start(result.frame.image, settings):
            self.sr_panel.quality_label.setText(f"Measuring frame {result.frame.index + 1}…")
            self.parts.status_bar.showMessage("Measuring PSNR…", 3000)

    def _on_quality(self, quality: FrameQuality, model: str, precision: str) -> None:
        self.last_quality = quality
        self.sr_panel.quality_label.setText(quality_text(quality, model, precision))
        self.parts.status_bar.showMessage(
            f"{model} {precision.upper()}: {quality.model.psnr_db:.2f} dB, SSIM "
            f"{quality.model.ssim:.4f} · bicubic {quality.bicubic.psnr_db:.2f} dB, SSIM "
            f"{quality.bicubic.ssim:.4f}",
            15000,
        )

    # ---- enlarged detections -------------------------------------------------------------

    def _configure_crops(self) -> None:
        on = self.settings.crops_enabled and not self.controller.superres
        self._show_below(on)
        if not on:
            self.crop_worker.configure(None)
            self.crop_strip.set_crops([], [])
            return
        spec = self.controller.catalog().get(self.settings.crops_model)
        if spec is None or not produces_image(spec):
            self.crop_worker.configure(None)
            return
        base = self.controller.settings
        device = base.device if base is not None else "cpu"
        self.crop_worker.configure(PipelineSettings(spec, device=device))

    def _on_crops_enabled(self, on: bool) -> None:
        self.settings.crops_enabled = on
        self._configure_crops()
        last = self.controller.last_result
        if on and last is not None:
            self.feed_crops(last)

    def _on_crops_model(self, name: str) -> None:
        self.settings.crops_model = name
        self._configure_crops()

    def feed_crops(self, result: FrameResult) -> None:
        """Hand the shown frame's detections of the chosen classes to the crop worker."""
        dets = result.output
        if self.crop_worker.settings is None or not isinstance(dets, Detections):
            return  # off, or a result with no boxes (a super-resolution model's)
        settings = self.controller.settings
        labels = settings.model.labels if settings is not None else ()
        chosen = self.crop_panel.classes()
        keep = np.array(
            [
                i
                for i, c in enumerate(dets.class_ids)
                if 0 <= c < len(labels) and labels[c] in chosen
            ],
            dtype=np.intp,
        )
        self.crop_worker.submit(result.frame.image, dets.select(keep), result.frame.index)

    def close(self) -> None:
        self.crop_worker.close()

    def _on_crops(self, crops: list[EnlargedCrop], index: int) -> None:
        del index
        settings = self.controller.settings
        labels = settings.model.labels if settings is not None else ()
        self.crop_strip.set_crops(crops, labels)


def upscaled(result: FrameResult) -> Upscaled | None:
    """``result``'s super-resolution output, None for another task's (a detector's)."""
    output: object = result.output
    return output if isinstance(output, Upscaled) else None
