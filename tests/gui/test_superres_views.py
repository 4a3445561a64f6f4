"""Super-resolution in the window: the real ESPCN x2 through the real pipeline on the bundled
sample, shown in each view of the canvas, under Xvfb. Pixels are read back from the
canvas's framebuffer at one screen pixel per upscaled pixel and checked against what the
view promises (the original's enlargement left of the wipe's divider, the model's output
right of it; nearest-neighbour enlargements in the lens)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from framelens.core.api import (
    Upscaled,
    bicubic_upscale,
    clamp_region,
    measure_frame_quality,
)
from framelens.gui.common.settings import Settings
from framelens.gui.player.main_window import MainWindow
from framelens.gui.superres.sr_lens import LENS_SIDE
from PySide6.QtCore import QPoint, QPointF, QSettings, Qt
from PySide6.QtGui import QImage, QWheelEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

pytestmark = pytest.mark.gui

TIMEOUT_MS = 60_000
FRAME = 300  # the person walking across
U8 = npt.NDArray[np.uint8]


def bgr(image: QImage) -> U8:
    rgb = image.convertToFormat(QImage.Format.Format_RGB888)
    w, h = rgb.width(), rgb.height()
    arr = np.frombuffer(rgb.constBits(), np.uint8, rgb.bytesPerLine() * h)
    return arr.reshape(h, rgb.bytesPerLine())[:, : w * 3].reshape(h, w, 3)[:, :, ::-1].copy()


def output(window: MainWindow) -> Upscaled:
    result = window.controller.last_result
    assert result is not None and isinstance(result.output, Upscaled)
    return result.output


def wait_frame(window: MainWindow, qtbot: QtBot, index: int, whole: bool = True) -> None:
    def ready() -> bool:
        r = window.controller.last_result
        return (
            r is not None
            and r.frame.index == index
            and isinstance(r.output, Upscaled)
            and (r.output.region is None) == whole
            and window.shown_index == index
        )

    qtbot.waitUntil(ready, timeout=TIMEOUT_MS)


def play_sr(window: MainWindow, qtbot: QtBot, sample: str, model: str = "espcn-x2") -> None:
    """``model`` on the sample, paused on FRAME."""
    window.choose_model(model)
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    window.controller.seek(FRAME)
    wait_frame(window, qtbot, FRAME)


def press(window: MainWindow, qtbot: QtBot, key: Qt.Key, mods: Qt.KeyboardModifier) -> None:
    """A key the user presses in the window (its shortcuts need it active)."""
    assert not window.error_box.isVisible(), window.error_box.text()
    window.activateWindow()
    window.canvas.setFocus()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=5000)
    qtbot.keyClick(window.canvas, key, mods)


def shown(window: MainWindow, qtbot: QtBot) -> U8:
    qtbot.wait(150)  # the paint after the last change
    return bgr(window.canvas.grab_frame_image())


def on_screen(window: MainWindow, image: U8, x0: int, x1: int, y0: int, y1: int) -> U8:
    """What ``image`` (upscaled size) puts at widget columns x0..x1, rows y0..y1 at one
    screen pixel per pixel, where the canvas has placed it."""
    r = window.canvas.image_rect()
    ox, oy = int(r.x()), int(r.y())
    return image[y0 - oy : y1 - oy, x0 - ox : x1 - ox]


def exact_share(a: U8, b: U8) -> float:
    assert a.shape == b.shape and a.size
    return float(np.all(a == b, axis=2).mean())


def test_sr_models_are_offered_and_play_with_detector_panels_hidden_and_plots_live(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    combo = window.panel.model_combo
    texts = [combo.itemText(i) for i in range(combo.count())]
    heading = texts.index("Super-resolution")
    sr_rows = [i for i in range(combo.count()) if combo.itemData(i) in ("espcn-x2", "fsrcnn-x4")]
    assert sr_rows and all(i > heading for i in sr_rows)
    assert not combo.model().item(heading).isEnabled()  # a heading, not a choice
    window.transport.realtime_button.setChecked(False)
    window.choose_model("espcn-x2")
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 20, timeout=TIMEOUT_MS)
    up = output(window)
    assert up.image is not None and up.image.shape == (864, 1536, 3)
    assert window.canvas.image_size == (1536, 864)
    thresholds, classes, overlay = window.panel.detection_boxes
    assert not thresholds.isVisible() and not classes.isVisible() and not overlay.isVisible()
    assert window.superres.sr_panel.isVisible() and window.superres.sr_toolbar.isVisible()
    assert not window.superres.crop_panel.isVisible()
    # the live plots, as for detection: fps and the stages of super-resolution
    window.plots.refresh()
    qtbot.waitUntil(lambda: window.plots.fps_curve.getData()[0] is not None, timeout=10_000)
    medians = window.plots.medians()
    assert medians["inference"] > 0 and medians["preprocess"] > 0 and medians["fps"] > 0
    assert medians["display"] > 0  # the canvas's upload and paint of the upscaled frame
    # back to a detector: its panels and the saved thresholds return
    window.choose_model("yolox-nano")
    qtbot.waitUntil(lambda: thresholds.isVisible(), timeout=10_000)
    assert not window.superres.sr_toolbar.isVisible() and window.superres.crop_panel.isVisible()
    assert window.controller.settings is not None
    assert window.controller.settings.params.conf == pytest.approx(window.settings.conf)  # type: ignore[union-attr]


def test_wipe_divider_drags_and_shows_the_original_left_and_the_model_right(
    window: MainWindow, qtbot: QtBot, sample: str, settings_file: object
) -> None:
    play_sr(window, qtbot, sample)
    press(window, qtbot, Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    assert window.canvas.mode == "wipe"
    assert window.superres.sr_mode_actions["wipe"].isChecked()
    canvas = window.canvas
    canvas.set_pixel_scale(1.0)
    start = QPoint(round(canvas.divider_x), canvas.height() // 2)
    target = QPoint(round(canvas.width() * 0.3), canvas.height() // 2)
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, start)
    QTest.mouseMove(canvas, QPoint((start.x() + target.x()) // 2, start.y()))
    QTest.mouseMove(canvas, target)
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, target)
    assert canvas.divider == pytest.approx(0.3, abs=2 / canvas.width())
    assert window.settings.sr_divider == pytest.approx(canvas.divider)

    result = window.controller.last_result
    assert result is not None
    original, up = result.frame.image, output(window).image
    assert up is not None
    pixels = shown(window, qtbot)
    r = canvas.image_rect()
    x_div = round(canvas.divider_x)
    y0, y1 = max(40, int(r.top())), min(canvas.height(), int(r.bottom()))  # below the captions
    x0, x1 = max(0, int(r.left())), min(canvas.width(), int(r.right()))
    left = pixels[y0:y1, x0 : x_div - 4]
    right = pixels[y0:y1, x_div + 4 : x1]
    bicubic = bicubic_upscale(original, 2)
    assert exact_share(left, on_screen(window, bicubic, x0, x_div - 4, y0, y1)) > 0.99
    assert exact_share(right, on_screen(window, up, x_div + 4, x1, y0, y1)) > 0.99
    # the two sides really differ: the model's pixels are not bicubic's
    assert exact_share(left, on_screen(window, up, x0, x_div - 4, y0, y1)) < 0.9

    # the original by nearest neighbour: each source pixel as a 2x2 block
    window.superres.sr_panel.filterChosen.emit("nearest")
    pixels = shown(window, qtbot)
    nearest = np.repeat(np.repeat(original, 2, axis=0), 2, axis=1)
    left = pixels[y0:y1, x0 : x_div - 4]
    assert exact_share(left, on_screen(window, nearest, x0, x_div - 4, y0, y1)) > 0.99
    assert window.settings.sr_original_filter == "nearest"
    # persisted: a new session reads the view and the divider back
    window.settings.sync()
    again = Settings(QSettings(str(settings_file), QSettings.Format.IniFormat))
    assert again.sr_mode == "wipe" and again.sr_divider == pytest.approx(canvas.divider)


def test_side_by_side_shows_original_and_upscaled_at_the_same_zoom_and_pan(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    play_sr(window, qtbot, sample)
    press(window, qtbot, Qt.Key.Key_3, Qt.KeyboardModifier.AltModifier)
    canvas = window.canvas
    assert canvas.mode == "side" and window.settings.sr_mode == "side"
    canvas.set_pixel_scale(1.0)
    centre = QPointF(canvas.width() * 0.75, canvas.height() / 2)  # in the upscaled half
    canvas.zoom_at(2.0, centre)  # zoom into the right half: both halves follow
    canvas.set_pixel_scale(1.0)  # and back to one screen pixel per pixel, panned
    canvas._pan = QPointF(-120.0, 30.0)  # the user's drag, shared by both halves
    result = window.controller.last_result
    assert result is not None
    up = output(window).image
    assert up is not None
    pixels = shown(window, qtbot)
    r = canvas.image_rect()
    half = (canvas.width() - 4) // 2
    off = int(canvas.right_offset())
    y0, y1 = max(40, int(r.top())), min(canvas.height(), int(r.bottom()))
    x0, x1 = max(0, int(r.left())), min(half, int(r.right()))
    left = pixels[y0:y1, x0:x1]
    right = pixels[y0:y1, x0 + off : x1 + off]
    bicubic = bicubic_upscale(result.frame.image, 2)
    assert exact_share(left, on_screen(window, bicubic, x0, x1, y0, y1)) > 0.99
    assert exact_share(right, on_screen(window, up, x0, x1, y0, y1)) > 0.99


def test_lens_shows_nearest_neighbour_enlargements_and_wheel_changes_its_zoom(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    play_sr(window, qtbot, sample)
    press(window, qtbot, Qt.Key.Key_4, Qt.KeyboardModifier.AltModifier)
    canvas = window.canvas
    assert canvas.mode == "lens"
    at = QPoint(canvas.width() // 2, canvas.height() // 2)
    QTest.mouseMove(canvas, at)
    qtbot.waitUntil(lambda: canvas.last_lens is not None, timeout=10_000)
    wheel = QWheelEvent(
        QPointF(at),
        QPointF(canvas.mapToGlobal(at)),
        QPoint(0, 0),
        QPoint(0, 120),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    canvas.wheelEvent(wheel)
    assert canvas.lens_zoom == 6 and window.settings.sr_lens_zoom == 6
    canvas.setFocus()
    qtbot.keyClick(canvas, Qt.Key.Key_Minus)
    assert canvas.lens_zoom == 4
    result = window.controller.last_result
    assert result is not None
    original, up = result.frame.image, output(window).image
    assert up is not None
    pixels = shown(window, qtbot)
    assert canvas.last_lens is not None
    panes, (orig_rect, up_rect) = canvas.last_lens
    k, side, (ox, oy) = 4, LENS_SIDE, panes.origin
    n = side // k
    # the pane under the cursor's neighbourhood: the cursor's pixel is in the middle
    cx, cy = canvas.lens_centre() or (0.0, 0.0)
    assert ox <= cx < ox + n and oy <= cy < oy + n
    expected_up = np.repeat(np.repeat(up[oy : oy + n, ox : ox + n], k, 0), k, 1)
    enlarged = np.repeat(np.repeat(original, 2, 0), 2, 1)  # the original at output size
    expected_orig = np.repeat(np.repeat(enlarged[oy : oy + n, ox : ox + n], k, 0), k, 1)
    got_up = pixels[up_rect.top() : up_rect.top() + side, up_rect.left() : up_rect.left() + side]
    got_orig = pixels[
        orig_rect.top() : orig_rect.top() + side, orig_rect.left() : orig_rect.left() + side
    ]
    assert np.array_equal(got_up, expected_up)
    assert np.array_equal(got_orig, expected_orig)
    assert not np.array_equal(got_up, got_orig)


def test_region_drag_upscales_only_that_region_and_escape_clears_it(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    play_sr(window, qtbot, sample)
    press(window, qtbot, Qt.Key.Key_5, Qt.KeyboardModifier.AltModifier)
    canvas = window.canvas
    assert canvas.mode == "roi" and window.superres.roi_view.isVisible()
    wait_frame(window, qtbot, FRAME)
    qtbot.waitUntil(lambda: canvas.image_size == (768, 432), timeout=10_000)  # the original
    r = canvas.image_rect()
    a = QPoint(round(r.left() + r.width() * 0.40), round(r.top() + r.height() * 0.30))
    b = QPoint(round(r.left() + r.width() * 0.62), round(r.top() + r.height() * 0.71))
    QTest.mousePress(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, a)
    QTest.mouseMove(canvas, b)
    QTest.mouseRelease(canvas, Qt.MouseButton.LeftButton, Qt.KeyboardModifier.NoModifier, b)
    region = canvas.region
    assert region is not None
    x, y, w, h = region
    assert x == pytest.approx(0.40 * 768, abs=3) and y == pytest.approx(0.30 * 432, abs=3)
    assert w == pytest.approx(0.22 * 768, abs=3) and h == pytest.approx(0.41 * 432, abs=3)
    used = clamp_region(region, 768, 432, 2)
    assert used is not None
    wait_frame(window, qtbot, FRAME, whole=False)
    up = output(window)
    assert up.region == used
    assert up.image is not None and up.image.shape == (2 * used[3], 2 * used[2], 3)
    qtbot.waitUntil(lambda: window.superres.roi_view.image_shape == up.image.shape, timeout=10_000)  # type: ignore[union-attr]
    # the region's pixels are the model's: the same as the whole frame upscaled there
    result = window.controller.last_result
    assert result is not None
    ux, uy, uw, uh = used
    sub = np.ascontiguousarray(result.frame.image[uy : uy + uh, ux : ux + uw])
    assert np.abs(up.image.astype(int) - bicubic_upscale(sub, 2)).mean() < 6
    # Esc: the whole frame again
    press(window, qtbot, Qt.Key.Key_Escape, Qt.KeyboardModifier.NoModifier)
    assert canvas.region is None
    wait_frame(window, qtbot, FRAME, whole=True)
    assert output(window).image.shape == (864, 1536, 3)  # type: ignore[union-attr]
    # a region, then another view: that view gets the whole frame upscaled
    canvas.set_region((100, 100, 64, 48))
    wait_frame(window, qtbot, FRAME, whole=False)
    press(window, qtbot, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    wait_frame(window, qtbot, FRAME, whole=True)
    assert not window.superres.roi_view.isVisible()


def test_measure_psnr_shows_the_models_and_bicubics_numbers_at_each_precision(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    play_sr(window, qtbot, sample)
    press(window, qtbot, Qt.Key.Key_M, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.superres.last_quality is not None, timeout=TIMEOUT_MS)
    q = window.superres.last_quality
    assert q is not None
    result, settings = window.controller.last_result, window.controller.settings
    assert result is not None and settings is not None
    direct = measure_frame_quality(result.frame.image, settings)
    assert q.model.psnr_db == pytest.approx(direct.model.psnr_db)
    assert q.bicubic.ssim == pytest.approx(direct.bicubic.ssim)
    text = window.superres.sr_panel.quality_label.text()
    assert f"{q.model.psnr_db:.2f} dB" in text and f"{q.bicubic.psnr_db:.2f} dB" in text
    assert f"{q.model.ssim:.4f}" in text and "FP32" in text
    # FP16 while paused: the toggle works for super-resolution, PSNR measured at FP16
    window.choose_precision("fp16")
    qtbot.waitUntil(
        lambda: window.state.precision == "fp16" and not window.state.loading_model,
        timeout=TIMEOUT_MS,
    )
    window.controller.seek(FRAME)
    wait_frame(window, qtbot, FRAME)
    window.superres.last_quality = None
    window.superres.measure_action.trigger()
    # rough edge 3: the frame as the transport counts it
    assert window.superres.sr_panel.quality_label.text() == f"Measuring frame {FRAME + 1}…"
    qtbot.waitUntil(
        lambda: window.transport.time_label.text().startswith(f"{FRAME + 1}/"), timeout=5000
    )
    qtbot.waitUntil(lambda: window.superres.last_quality is not None, timeout=TIMEOUT_MS)
    assert "FP16" in window.superres.sr_panel.quality_label.text()
    fp16 = window.superres.last_quality
    assert fp16 is not None
    assert fp16.model.psnr_db == pytest.approx(q.model.psnr_db, abs=0.5)


def test_enlarge_detections_strip_holds_the_people_upscaled(
    window: MainWindow, qtbot: QtBot, sample: str
) -> None:
    window.open_source(sample)
    qtbot.waitUntil(lambda: window.results_shown >= 3, timeout=TIMEOUT_MS)
    window.controller.pause()
    qtbot.waitUntil(lambda: not window.state.playing, timeout=10_000)
    assert window.superres.crop_panel.isVisible()
    assert window.superres.crop_panel.classes() == {"person"}  # the default: people (and faces)
    window.superres.crop_panel.enable_check.setChecked(True)
    window.controller.seek(FRAME)
    qtbot.waitUntil(lambda: len(window.superres.crop_strip.crops) > 0, timeout=TIMEOUT_MS)
    assert window.superres.crop_strip.isVisible()
    result = window.controller.last_result
    assert result is not None
    people = [i for i, c in enumerate(result.output.class_ids) if c == 0]
    assert 0 < len(window.superres.crop_strip.crops) <= min(8, len(people))
    for crop in window.superres.crop_strip.crops:
        x1, y1, x2, y2 = crop.box
        assert crop.image.shape == (2 * (y2 - y1), 2 * (x2 - x1), 3)
        assert crop.class_id == 0
        # the crop holds a detected person
        assert any(
            x1 <= result.output.boxes[i][0] + 1 and result.output.boxes[i][2] - 1 <= x2
            for i in people
        )
    assert window.settings.crops_enabled
    # no class chosen: the next frame enlarges nothing
    window.superres.crop_panel.class_list.item(0).setCheckState(Qt.CheckState.Unchecked)
    window.controller.step(1)
    qtbot.waitUntil(lambda: not window.superres.crop_strip.crops, timeout=TIMEOUT_MS)
