"""Super-resolution as a task: the frame upscaled by the model's scale.

Y-channel models (ESPCN, FSRCNN) and colour models (ESRGAN, user exports), any input
size: the output is exactly scale x the frame (padded to a multiple of the scale inside,
the output cut back; frames larger than the model's tile run tiled, see tiling.py). The
colour arithmetic is color.py's. The output is the upscaled BGR frame: what export
writes, the canvas shows and compare measures.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt
from framelens.core.errors import ConfigError, ModelError
from framelens.core.geometry import InputGeometry, Letterbox
from framelens.core.models.spec import ModelSpec
from framelens.core.stages.draw.style import OverlayStyle
from framelens.core.stages.engines.base import Engine
from framelens.core.stages.sinks.atomic import StrPath
from framelens.core.stages.tasks.base import EngineOutputs, OutputWriter, Task
from framelens.core.stages.tasks.superres.color import (
    SrInput,
    SrPreprocessor,
    clamp_region,
    merge_output,
    output_size,
    padded_size,
)
from framelens.core.stages.tasks.superres.metrics import ImageAgreement, image_agreement
from framelens.core.stages.tasks.superres.output import SuperResParams, Upscaled
from framelens.core.stages.tasks.superres.tiling import (
    DEFAULT_OVERLAP,
    TiledEngine,
    cuda_options,
    default_tile,
    gpu_workers,
)
from framelens.core.types import Image

if TYPE_CHECKING:
    from framelens.core.stages.tasks.device import DeviceHalf, DeviceRig


class SuperResTask(Task[Upscaled, SuperResParams, ImageAgreement, SrInput]):
    """Super-resolution by ``spec.scale``: channels 1 (Y of YCrCb) or 3 (colour)."""

    name: ClassVar[str] = "superres"
    writes_outputs: ClassVar[bool] = False  # the upscaled video is the output
    produces_image: ClassVar[bool] = True
    batches_frames: ClassVar[bool] = False  # an image per frame: batches gain nothing
    int8_measure: ClassVar[str] = "psnr"

    def __init__(self, spec: ModelSpec) -> None:
        if spec.scale < 2 or spec.channels not in (1, 3):
            raise ModelError(
                f"{spec.name}: a super-resolution model needs a scale of 2 or more and 1 or 3 "
                f"channels (scale {spec.scale}, channels {spec.channels})"
            )
        super().__init__(spec)

    @property
    def scale(self) -> int:
        return self.spec.scale

    def input_geometry(self, src_w: int, src_h: int) -> InputGeometry:
        """The model's input: the frame unscaled, padded on the right and bottom to a
        multiple of the scale."""
        w, h = padded_size(src_w, src_h, self.scale)
        return InputGeometry(h, w, w, h, 0, 0, Letterbox(1.0, 0.0, 0.0, src_w, src_h))

    def preprocessor(self, src_w: int, src_h: int, params: SuperResParams) -> SrPreprocessor:
        return SrPreprocessor(self.spec, src_w, src_h, params.region)

    def preprocess_key(self, src_w: int, src_h: int, params: SuperResParams) -> Hashable:
        return (src_w, src_h, clamp_region(params.region, src_w, src_h, self.scale))

    def output_size(self, src_w: int, src_h: int) -> tuple[int, int]:
        return output_size(src_w, src_h, self.scale)

    def host_engine(self, engine: Engine, device: str, params: SuperResParams) -> TiledEngine:
        tile = (params.tile, params.tile) if params.tile else default_tile(self.spec, device)
        return TiledEngine(engine, self.scale, tile)

    @classmethod
    def default_params(cls) -> SuperResParams:
        return SuperResParams()

    @classmethod
    def cuda_options(cls, spec: ModelSpec) -> dict[str, str]:
        return cuda_options(spec)

    @classmethod
    def gpu_workers(
        cls, spec: ModelSpec, run_frames: Callable[[], int | None]
    ) -> tuple[int, str] | None:
        return gpu_workers(spec, run_frames)

    @classmethod
    def calibration_input(
        cls, spec: ModelSpec, image: Image, patch: int
    ) -> tuple[npt.NDArray[np.float32], SrInput]:
        """The model's input for the most detailed ``patch``-square of the frame (the
        largest luma variance on a grid of candidates), and its SrInput."""
        h, w = image.shape[:2]
        side = max(spec.scale, min(patch, w, h))
        grey = image.mean(axis=2) if image.ndim == 3 else image
        best, where = -1.0, (0, 0)
        for y in np.linspace(0, h - side, 4).astype(int):
            for x in np.linspace(0, w - side, 6).astype(int):
                variance = float(grey[y : y + side, x : x + side].var())
                if variance > best:
                    best, where = variance, (int(x), int(y))
        pre = SrPreprocessor(spec, w, h, (*where, side, side))
        return pre(image).copy(), pre.geometry

    @classmethod
    def params_from_options(cls, spec: ModelSpec, options: Mapping[str, Any]) -> SuperResParams:
        del spec
        tile = int(options.get("tile") or 0)
        if tile and tile <= 2 * DEFAULT_OVERLAP:
            raise ConfigError(f"--tile must be 0 (automatic) or more than {2 * DEFAULT_OVERLAP}")
        return SuperResParams(tile=tile)

    @classmethod
    def describe(cls, spec: ModelSpec) -> str:
        channels = "Y channel" if spec.channels == 1 else "colour"
        return f"x{spec.scale}, {channels}, any size"

    @classmethod
    def provenance(cls, spec: ModelSpec, params: SuperResParams) -> dict[str, Any]:
        del params
        return {
            "task": spec.task,
            "scale": spec.scale,
            "task_summary": f"super-resolution x{spec.scale}",
        }

    @classmethod
    def device_unavailable(cls, params: SuperResParams) -> str | None:
        if params.tile:  # the GPU pipeline runs frames whole (device memory is what tiles save)
            return f"a tile of {params.tile} px runs tiled on the host pipeline"
        return None

    def device_half(self, rig: DeviceRig) -> DeviceHalf:
        """Frames upscaled one by one on the device, the colour split and merge in CUDA
        kernels (superres/device.py)."""
        from framelens.core.stages.tasks.superres.device import SuperResDevice

        return SuperResDevice(rig, self)

    def decode(
        self, outputs: EngineOutputs, geometries: Sequence[SrInput], params: SuperResParams
    ) -> list[Upscaled]:
        del params
        if not outputs:
            raise ModelError(f"{self.spec.name}: the model returned no output")
        out = np.asarray(outputs[0], dtype=np.float32)
        if out.ndim != 4 or out.shape[0] != len(geometries):
            raise ModelError(
                f"{self.spec.name}: output is {list(out.shape)}, but the batch has "
                f"{len(geometries)} frame(s)"
            )
        try:
            return [
                Upscaled(merge_output(self.spec, out[i], g), self.scale, region=g.region)
                for i, g in enumerate(geometries)
            ]
        except ValueError as exc:
            raise ModelError(str(exc)) from None

    def empty(self) -> Upscaled:
        return Upscaled(None, self.scale)

    def output_image(self, output: Upscaled) -> Image | None:
        return output.image

    def annotate(
        self, image: Image, output: Upscaled, style: OverlayStyle, *, copy: bool = True
    ) -> Image:
        """The upscaled frame (no overlay: the image is the result)."""
        del style, copy
        return image if output.image is None else output.image

    def agree(self, reference: Upscaled, output: Upscaled) -> ImageAgreement:
        if reference.image is None or output.image is None:
            raise ModelError("super-resolution agreement needs two upscaled frames")
        return image_agreement(reference.image, output.image)

    def open_writer(self, path: StrPath, meta: Mapping[str, Any]) -> OutputWriter[Upscaled]:
        del meta
        raise ConfigError(
            f"super-resolution has no detections to write to {path}; --export writes the "
            "upscaled video"
        )
