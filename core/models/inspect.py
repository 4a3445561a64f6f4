"""Recognise a user's ONNX model: how to feed it, how to decode it, its labels.

What describes a model, strongest first:

1. explicit arguments: ``layout=`` / ``labels_file=`` / ``task=`` (CLI ``--layout``,
   ``--labels``, ``--task``);
2. a sidecar file next to the model, named after it plus ``.toml``
   (``best.onnx`` -> ``best.onnx.toml``);
3. the model's own metadata: Ultralytics exports (YOLOv5 repo, YOLOv8, YOLO11,
   YOLOv10, YOLO26) carry ``names``, ``stride``, ``imgsz``, ``task``, ``end2end``;
4. the output names of YuNet face models, which no other layout shares.

The output shape is checked against the chosen layout but never decides it alone:
YOLOX and YOLOv5 are both [1, N, 5+C]. A model nothing describes is refused with
a ModelError that says what was found and what to pass.

The sidecar format is described (and validated) in sidecar.py.

Preprocessing defaults when neither sidecar nor metadata say otherwise: YOLOX
and YuNet BGR 0..255 top-left (YuNet pads with 0, like OpenCV); YOLOv5, YOLOv8
and end2end follow Ultralytics: RGB, /255, centred, pad 114.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from framelens.core.errors import ModelError
from framelens.core.models.inspect_superres import superres_spec
from framelens.core.models.labels import names_from_value, read_labels
from framelens.core.models.sidecar import PREP_KEYS, read_sidecar
from framelens.core.models.spec import LAYOUTS, TASK_OF_LAYOUT, ModelSpec

Dim = int | str | None  # known size | symbolic name | unknown
ULTRALYTICS_SCALE = 1.0 / 255.0
DEFAULT_INPUT = (640, 640)
DETECTION_LAYOUTS = tuple(k for k, v in TASK_OF_LAYOUT.items() if v != "superres")
YUNET_OUTPUTS = frozenset(f"{h}_{s}" for h in ("cls", "obj", "bbox", "kps") for s in (8, 16, 32))
FLOAT_TYPES = (0, 1, 10, 11)  # onnx.TensorProto: undeclared, float32, float16, float64


# Preprocessing by layout family, used when nothing more specific is known.
_PREP_DEFAULTS: dict[str, dict[str, Any]] = {
    "yolox": {"color_order": "bgr", "input_scale": 1.0, "letterbox": "topleft", "pad_value": 114},
    "yunet": {"color_order": "bgr", "input_scale": 1.0, "letterbox": "topleft", "pad_value": 0},
}
_ULTRALYTICS_PREP: dict[str, Any] = {
    "color_order": "rgb",
    "input_scale": ULTRALYTICS_SCALE,
    "letterbox": "center",
    "pad_value": 114,
}


# ------------------------------------------------------------------ the graph


@dataclass(frozen=True)
class Tensor:
    name: str
    dims: tuple[Dim, ...]
    elem_type: int  # onnx.TensorProto enum: 1 float32, 10 float16

    def shape_text(self) -> str:
        return "[" + ", ".join("?" if d is None else str(d) for d in self.dims) + "]"

    def dim(self, i: int) -> int | None:
        """A dimension's size if it is fixed in the graph."""
        d = self.dims[i]
        return d if isinstance(d, int) else None


@dataclass(frozen=True)
class GraphInfo:
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    metadata: dict[str, str]


def read_graph(path: Path) -> GraphInfo:
    """Inputs, outputs and metadata of an ONNX file; ModelError if it is not one."""
    import onnx  # slow to import; only needed when a user model is opened

    if not path.is_file():
        raise ModelError(f"model file {path} does not exist")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf DecodeError, OSError, onnx's own errors
        raise ModelError(f"{path.name} is not a valid ONNX model: {exc}") from exc
    # protobuf accepts some non-ONNX bytes as an empty message: require a real graph.
    if model.ir_version <= 0 or not model.graph.output or not model.graph.node:
        raise ModelError(f"{path.name} is not a valid ONNX model: it has no graph")
    check_external_data(model, path)
    made = {o for n in model.graph.node for o in n.output}
    made |= {v.name for v in model.graph.input} | {i.name for i in model.graph.initializer}
    for out in model.graph.output:
        if out.name not in made:
            raise ModelError(
                f"{path.name} is not a valid ONNX model: its output '{out.name}' is computed "
                "by no node (a broken export)"
            )

    def tensor(vi: Any) -> Tensor:
        tt = vi.type.tensor_type
        dims: list[Dim] = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                dims.append(int(d.dim_value))
            else:
                dims.append(d.dim_param or None)
        return Tensor(vi.name, tuple(dims), int(tt.elem_type))

    weights = {init.name for init in model.graph.initializer}
    return GraphInfo(
        inputs=tuple(tensor(v) for v in model.graph.input if v.name not in weights),
        outputs=tuple(tensor(v) for v in model.graph.output),
        metadata={p.key: p.value for p in model.metadata_props},
    )


def _tensors(graph: Any) -> Iterator[Any]:
    """Every TensorProto a graph holds: initializers, constants, subgraphs' too."""
    for sparse in graph.sparse_initializer:
        yield from (sparse.values, sparse.indices)
    yield from graph.initializer
    for node in graph.node:
        yield from _node_tensors(node)


def _node_tensors(node: Any) -> Iterator[Any]:
    for attr in node.attribute:
        if attr.HasField("t"):
            yield attr.t
        yield from attr.tensors
        for sparse in [attr.sparse_tensor, *attr.sparse_tensors]:
            yield from (sparse.values, sparse.indices)
        for sub in [attr.g, *attr.graphs]:
            yield from _tensors(sub)


def check_external_data(model: Any, path: Path) -> list[str]:
    """ModelError for weights stored outside the model's folder (an absolute path, "..",
    a link out of it) or missing: refused before ONNX Runtime or onnx opens any file.
    Returns the external-data files (relative to the folder, each once, in order)."""
    folder = path.resolve().parent
    functions = (t for f in model.functions for n in f.node for t in _node_tensors(n))
    locations: list[str] = []
    for tensor in (*_tensors(model.graph), *functions):
        if tensor.data_location != 1:  # onnx.TensorProto.EXTERNAL
            continue
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        where = f"{path.name}: weights of '{tensor.name}' are in external data '{location}'"
        file = (folder / location).resolve()
        if not location or Path(location).is_absolute() or not file.is_relative_to(folder):
            raise ModelError(f"{where}, outside the model's folder {folder}: refused")
        if not file.is_file():
            raise ModelError(f"{where}, which is not in {folder}")
        if location not in locations:
            locations.append(location)
    return locations


# ---------------------------------------------------------- Ultralytics metadata


@dataclass(frozen=True)
class Ultralytics:
    """What an Ultralytics (or YOLOv5 repo) export says about itself."""

    names: tuple[str, ...]
    task: str
    imgsz: tuple[int, int] | None
    end2end: bool
    description: str
    licence: str


def _literal(text: str | None) -> object:
    if text is None:
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


def read_ultralytics(meta: Mapping[str, str], where: str) -> Ultralytics | None:
    """Ultralytics metadata, or None when the model has none.

    Exports of the ultralytics package set author "Ultralytics"; the YOLOv5
    repository's exports only set ``stride`` and ``names``. Values are str()
    of Python objects, hence ast.literal_eval.
    """
    if "names" not in meta or not ("stride" in meta or "Ultralytics" in meta.get("author", "")):
        return None
    names = names_from_value(_literal(meta["names"]), f"{where} metadata 'names'")
    imgsz_value = _literal(meta.get("imgsz"))
    imgsz: tuple[int, int] | None = None
    if isinstance(imgsz_value, int):
        imgsz = (imgsz_value, imgsz_value)
    elif isinstance(imgsz_value, list | tuple) and len(imgsz_value) == 2:
        imgsz = (int(imgsz_value[0]), int(imgsz_value[1]))
    args = _literal(meta.get("args"))
    description = meta.get("description", "")
    # end2end: YOLOv10/YOLO26 heads; args nms=True: NMS exported into the graph.
    end2end = (
        meta.get("end2end", "").strip() == "True"
        or (isinstance(args, dict) and bool(args.get("nms")))
        or any(tag in description for tag in ("YOLOv10", "YOLO26"))
    )
    return Ultralytics(
        names=names,
        task=meta.get("task", "detect"),
        imgsz=imgsz,
        end2end=end2end,
        description=description,
        licence=meta.get("license", ""),
    )


def ultralytics_layout(u: Ultralytics, out: Tensor) -> str | None:
    """The layout an Ultralytics export's first output has, from its class count."""
    if len(out.dims) != 3:
        return None
    c = len(u.names)
    if u.end2end and out.dim(2) == 6:
        return "end2end"
    if out.dim(1) == 4 + c:
        return "yolov8"
    if out.dim(2) == 5 + c:
        return "yolov5"
    if out.dim(2) == 6:
        return "end2end"
    return None


# ------------------------------------------------------------------- checking


def check_input(graph: GraphInfo, name: str) -> Tensor:
    if len(graph.inputs) != 1:
        listed = ", ".join(f"'{t.name}' {t.shape_text()}" for t in graph.inputs)
        raise ModelError(
            f"{name} has {len(graph.inputs)} inputs ({listed}); FrameLens feeds one image"
        )
    inp = graph.inputs[0]
    if len(inp.dims) != 4 or inp.dim(1) not in (3, None) or inp.dim(0) not in (1, None):
        raise ModelError(
            f"{name}: input '{inp.name}' is {inp.shape_text()} — not an image model "
            "(need [1, 3, height, width])"
        )
    if inp.elem_type != 1:  # onnx.TensorProto.FLOAT
        raise ModelError(
            f"{name}: input '{inp.name}' is not float32 (ONNX type {inp.elem_type}); "
            "FrameLens feeds float32 (export without half precision)"
        )
    return inp


def yolox_rows(height: int, width: int) -> int:
    return sum((height // s) * (width // s) for s in (8, 16, 32))


def check_layout(
    layout: str, graph: GraphInfo, n_labels: int | None, input_hw: tuple[int, int] | None, name: str
) -> int | None:
    """Raise ModelError unless the outputs fit the layout; returns the class count if known.

    n_labels, when known, must match the class count the shape implies.
    """
    decoded = graph.outputs if layout == "yunet" else graph.outputs[:1]
    for t in decoded:
        if t.elem_type not in FLOAT_TYPES:
            raise ModelError(
                f"{name}: output '{t.name}' is not floating point (ONNX type {t.elem_type}); "
                f"layout {layout} decodes float32 or float16 outputs"
            )
    if layout == "yunet":
        missing = sorted(YUNET_OUTPUTS - {o.name for o in graph.outputs})
        if missing:
            raise ModelError(f"{name}: layout yunet needs outputs {', '.join(missing)}")
        if n_labels not in (None, 1):
            raise ModelError(f"{name}: a YuNet model has one class (face), not {n_labels}")
        return 1
    out = graph.outputs[0]
    found = f"output '{out.name}' is {out.shape_text()}"
    if len(out.dims) != 3 or out.dim(0) not in (1, None):
        raise ModelError(f"{name}: {found}; layout {layout} needs a [1, ..., ...] output")
    rows, cols = out.dim(1), out.dim(2)
    if layout == "end2end":
        if cols != 6:
            raise ModelError(
                f"{name}: {found}; layout end2end needs [1, N, 6] (x1, y1, x2, y2, score, class)"
            )
        return n_labels
    if layout == "yolov8":
        if rows is None or rows < 5 or (cols is not None and rows >= cols):
            raise ModelError(
                f"{name}: {found}; layout yolov8 needs [1, 4+C, N] with fewer rows than boxes"
            )
        classes, what = rows - 4, "4 box values"
    else:  # yolox, yolov5
        if cols is None or cols < 6:
            raise ModelError(f"{name}: {found}; layout {layout} needs [1, N, 5+C]")
        classes, what = cols - 5, "4 box values + objectness"
        if layout == "yolox" and input_hw is not None and rows is not None:
            want = yolox_rows(*input_hw)
            if rows != want:
                raise ModelError(
                    f"{name}: {found}; layout yolox expects {want} rows for a "
                    f"{input_hw[1]}x{input_hw[0]} input (strides 8, 16, 32)"
                )
    if n_labels is not None and n_labels != classes:
        raise ModelError(
            f"{name}: {found}, which layout {layout} reads as {what} + {classes} classes, "
            f"but there are {n_labels} labels"
        )
    return classes


def undecidable(graph: GraphInfo, name: str) -> ModelError:
    """The error for a model nothing describes: say what was found and what to pass."""
    out = graph.outputs[0]
    found = f"output '{out.name}' is {out.shape_text()}"

    def ask(*layouts: str) -> str:
        # the same words serve the CLI and the GUI's import dialog
        return (
            f"choose the layout ({' or '.join(layouts)}: --layout on the command line, "
            f"'Output layout' in the import dialog) or add a {name}.toml sidecar"
        )

    rows, cols = (out.dim(1), out.dim(2)) if len(out.dims) == 3 else (None, None)
    if len(out.dims) != 3 or out.dim(0) not in (1, None):
        return ModelError(
            f"cannot decode {name}: {found}, which fits no detection layout "
            f"({', '.join(DETECTION_LAYOUTS)}) and is no upscaled image; a classifier?"
        )
    if cols == 6:
        return ModelError(
            f"cannot tell how to decode {name}: {found} (end2end, or YOLOX/YOLOv5 with one "
            f"class); {ask('end2end', 'yolox', 'yolov5')}"
        )
    if rows is not None and cols is not None and rows < cols:
        return ModelError(
            f"cannot tell how to decode {name}: {found} (YOLOv8/YOLO11 shape, but no "
            f"metadata confirms it); {ask('yolov8')}"
        )
    if cols is not None and cols > 6:
        return ModelError(
            f"cannot tell how to decode {name}: {found} (YOLOX and YOLOv5 share this "
            f"shape); {ask('yolox', 'yolov5')}"
        )
    return ModelError(f"cannot decode {name}: {found}, which fits no detection layout")


# ------------------------------------------------------------------ inspect


def inspect_model(
    path: str | Path,
    *,
    layout: str | None = None,
    labels_file: str | Path | None = None,
    task: str | None = None,
) -> ModelSpec:
    """A ModelSpec for a user's ONNX file, or a ModelError saying why there is none."""
    path = Path(path)
    name = path.name
    if layout is not None and layout not in LAYOUTS:
        raise ModelError(f"unknown layout {layout!r}; use one of {', '.join(LAYOUTS)}")
    graph = read_graph(path)
    sidecar = read_sidecar(path)
    if task in (None, "superres") and layout in (None, "superres"):
        sr = superres_spec(path, list(graph.inputs), list(graph.outputs), sidecar)
        if sr is not None:
            return sr
    if task == "superres" or layout == "superres":
        raise ModelError(
            f"{name} is not a super-resolution model: its output is not its input upscaled"
        )
    inp = check_input(graph, name)
    u = read_ultralytics(graph.metadata, name)
    if u is not None and u.task != "detect":
        raise ModelError(
            f"{name} is an Ultralytics '{u.task}' model; FrameLens decodes detection "
            "models (task=detect) and faces"
        )

    # Layout: argument > sidecar > metadata > YuNet's output names.
    chosen = layout or sidecar.get("layout")
    if chosen is None and u is not None:
        chosen = ultralytics_layout(u, graph.outputs[0])
        if chosen is None:
            out = graph.outputs[0]
            raise ModelError(
                f"{name}: its metadata lists {len(u.names)} classes, but output '{out.name}' "
                f"is {out.shape_text()}, which no layout reads with {len(u.names)} classes"
            )
    if chosen is None and {o.name for o in graph.outputs} >= YUNET_OUTPUTS:
        chosen = "yunet"
    if chosen is None:
        raise undecidable(graph, name)

    derived_task = TASK_OF_LAYOUT[chosen]
    for given, source in ((task, "task"), (sidecar.get("task"), f"{name}.toml task")):
        if given is not None and given != derived_task:
            raise ModelError(
                f"{name} is a '{derived_task}' model (layout {chosen}); {source} {given!r} "
                "does not fit it"
            )

    # Labels: --labels > sidecar > metadata; defaults once the class count is known.
    labels: tuple[str, ...] | None = None
    if labels_file is not None:
        labels = read_labels(labels_file)
    elif "labels" in sidecar:
        labels = sidecar["labels"]
    elif u is not None:
        labels = u.names
    elif chosen == "yunet":
        labels = ("face",)

    # Input size: fixed by the graph, else sidecar, else metadata, else 640x640.
    h, w = inp.dim(2), inp.dim(3)
    static = (h, w) if h is not None and w is not None else None
    if static is not None and sidecar.get("input_size", static) != static:
        raise ModelError(
            f"{name}.toml: input_size {list(sidecar['input_size'])} contradicts the "
            f"model's fixed input {inp.shape_text()}"
        )
    input_size = static or sidecar.get("input_size") or (u.imgsz if u else None) or DEFAULT_INPUT
    dynamic = sidecar.get("dynamic_input", chosen == "yunet" and static is None)
    if dynamic and static is not None:
        raise ModelError(f"{name}.toml: dynamic_input, but the model's input is {static}")

    n_classes = check_layout(chosen, graph, None if labels is None else len(labels), static, name)
    if labels is None:
        labels = tuple(f"class{i}" for i in range(n_classes or 0))

    fields: dict[str, Any] = dict(_PREP_DEFAULTS.get(chosen, _ULTRALYTICS_PREP))
    if u is not None:
        fields.update(_ULTRALYTICS_PREP)
    fields.update({k: sidecar[k] for k in PREP_KEYS if k in sidecar})
    description = sidecar.get("description") or (u.description if u else "")
    return ModelSpec(
        name=path.stem,
        path=path.resolve(),
        layout=chosen,
        task=derived_task,
        input_size=input_size,
        dynamic_input=dynamic,
        labels=labels,
        licence=sidecar.get("licence") or (u.licence if u else ""),
        origin=sidecar.get("origin", str(path)),
        description=description or f"user model ({chosen} layout)",
        **fields,
    )
