"""Batch variants: a fixed batch-1 graph rewritten to take any batch, cached.

Exported detectors are often fixed to batch 1 (YOLOX-Nano: images [1,3,416,416] ->
output [1,3549,85]). Marking the input's batch dynamic is not enough: such graphs
reshape with constant targets such as [1, 85, -1], which fold a batch of N into one
image's rows ([1, 10647, 85] for batch 3, silently wrong). The rewrite:

* makes dim 0 of the input and of every output the symbolic ``batch``;
* replaces the leading 1 of every constant Reshape target (an initializer or a Constant
  node) that reshapes a batch-carrying tensor by 0, ONNX's "copy this dim from the
  input", found by shape inference with a symbolic batch until nothing changes;
* checks the graph (onnx.checker, shape inference: every output must carry the batch)
  and runs it on ONNX Runtime's CPU provider on a batch of 2 against the original graph
  on each input alone, before anything is cached.

A graph that cannot be made batch-dynamic this way is refused with a one-line ModelError.
The rewrite only touches shapes, so it composes with the precision variants: an FP16 or
INT8 graph gets the same rewrite (and records its precision in the entry), and the FP16
conversion of a batch variant is the batch variant of the FP16 graph.

Entries live in the variant cache (core.cache: complete or absent), keyed by the graph's
SHA-256 and the rewrite's version; the entry records the model file's SHA-256, and an
entry whose file does not match it (a corrupted or partial copy) is built again.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from framelens.core.cache import MODEL_FILE, digest, read_entry, staging, variants_dir
from framelens.core.errors import ModelError
from framelens.core.models.catalog import model_sha256
from framelens.core.models.spec import ModelSpec

__all__ = [
    "BATCH_DIM",
    "BatchVariant",
    "batch_variant",
    "graph_batch",
    "make_batch_dynamic",
    "prepare_batch_variant",
]

BATCH_DIM = "batch"
REWRITE_VERSION = 1  # bump when a change to the rewrite makes old entries wrong
VERIFY_BATCH = 2
PROBE_BATCH = 7  # the batch shape inference is run with to find batch-carrying tensors
VERIFY_TOLERANCE = 1e-4  # of the output's own scale (max |value|)

Dim = int | str | None


@dataclass(frozen=True)
class BatchVariant:
    """A batch-dynamic graph: ``spec`` points at it (the input spec itself when its graph
    already has a dynamic batch). ``rewritten``: the Reshape nodes whose target now
    copies the batch; ``from_cache``: whether the entry was there already."""

    spec: ModelSpec
    key: str
    from_cache: bool
    rewritten: tuple[str, ...] = ()


# ---- reading the graph ---------------------------------------------------------------------


def _load(path: Path, *, weights: bool = True) -> Any:
    import onnx

    try:
        return onnx.load(str(path), load_external_data=weights)
    except Exception as exc:  # protobuf's DecodeError, OSError, ...
        raise ModelError(f"{path} is not a valid ONNX model: {_one_line(exc)}") from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _graph_input(model: Any, name: str) -> Any:
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if len(inputs) != 1:
        raise ModelError(f"{name}: a batch variant needs a graph with one input, not {len(inputs)}")
    return inputs[0]


def _dims(value_info: Any) -> list[Dim]:
    if not value_info.type.HasField("tensor_type"):
        return []
    tensor = value_info.type.tensor_type
    if not tensor.HasField("shape"):
        return []
    return [
        d.dim_value if d.HasField("dim_value") else (d.dim_param if d.dim_param else None)
        for d in tensor.shape.dim
    ]


def graph_batch(path: Path) -> int | None:
    """The batch a graph's input is fixed to, or None when its batch dim is dynamic."""
    model = _load(path, weights=False)
    dims = _dims(_graph_input(model, path.name))
    if not dims:
        raise ModelError(f"{path.name}: the graph's input has no shape")
    first = dims[0]
    return first if isinstance(first, int) and first > 0 else None


def _set_batch(value_info: Any) -> None:
    dim = value_info.type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_param = BATCH_DIM


def _probed(model: Any, name: str) -> dict[str, list[Dim]]:
    """Shapes by tensor name from ONNX shape inference on a copy of ``model`` fed a batch
    of PROBE_BATCH (stale intermediate shapes and the outputs' batch dims cleared): a
    tensor whose dim 0 is PROBE_BATCH carries the batch. (A static probe rather than the
    symbolic dim: ONNX's inference loses symbols at merges, e.g. Concat, Resize.)"""
    import onnx

    scratch = onnx.ModelProto()
    scratch.CopyFrom(model)
    del scratch.graph.value_info[:]
    dim = _graph_input(scratch, name).type.tensor_type.shape.dim[0]
    dim.Clear()
    dim.dim_value = PROBE_BATCH
    for out in scratch.graph.output:
        if out.type.tensor_type.shape.dim:
            out.type.tensor_type.shape.dim[0].Clear()
    try:
        inferred = onnx.shape_inference.infer_shapes(scratch, data_prop=True)
    except Exception as exc:
        raise ModelError(f"shape inference failed: {_one_line(exc)}") from None
    shapes: dict[str, list[Dim]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        shapes[vi.name] = _dims(vi)
    return shapes


# ---- the rewrite ---------------------------------------------------------------------------


def _constant_shapes(model: Any) -> dict[str, npt.NDArray[Any]]:
    """Values of the int64 tensors an initializer or a Constant node holds, by name."""
    from onnx import numpy_helper

    values: dict[str, npt.NDArray[Any]] = {}
    for init in model.graph.initializer:
        if init.data_type == 7:  # INT64
            values[init.name] = numpy_helper.to_array(init)
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == 7:
                    values[node.output[0]] = numpy_helper.to_array(attr.t)
    return values


def make_batch_dynamic(model: Any, name: str = "model") -> tuple[Any, tuple[str, ...]]:
    """A copy of the batch-1 ``model`` (an onnx.ModelProto) with a dynamic batch, and the
    names of the Reshape nodes rewritten. ModelError (one line) when the graph's batch is
    not a fixed 1 or the graph cannot be made batch-dynamic safely. ``name`` goes into
    the messages."""
    import onnx
    from onnx import numpy_helper

    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    inp = _graph_input(out, name)
    dims = _dims(inp)
    if not dims or dims[0] != 1:
        raise ModelError(
            f"{name}: only graphs fixed to batch 1 get a batch variant; its input is "
            f"{['?' if d is None else d for d in dims]}"
        )
    _set_batch(inp)
    for output in graph.output:
        odims = _dims(output)
        if not odims or odims[0] != 1:
            raise ModelError(
                f"{name}: output {output.name} is {odims}, with no batch-1 leading dim "
                "to make dynamic"
            )
        _set_batch(output)
    del graph.value_info[:]  # shapes inferred for batch 1: stale
    _sort_nodes(graph, name)

    constants = _constant_shapes(out)
    init_names = {i.name for i in graph.initializer}
    rewritten: list[str] = []
    done: set[int] = set()
    while True:
        shapes = _probed(out, name)
        changed = False
        for index, node in enumerate(graph.node):
            if node.op_type != "Reshape" or index in done or len(node.input) < 2:
                continue
            target = constants.get(node.input[1])
            data = shapes.get(node.input[0], [])
            if target is None or target.ndim != 1 or not target.size or int(target[0]) != 1:
                continue
            if not data or data[0] != PROBE_BATCH:
                continue  # not a batch-carrying tensor (or not known to be one)
            if any(a.name == "allowzero" and a.i for a in node.attribute):
                raise ModelError(
                    f"{name}: Reshape {node.name or index} uses allowzero, its batch cannot "
                    "be copied"
                )
            new = target.copy()
            new[0] = 0
            new_name = f"{node.input[1]}__batch"
            k = 0
            while new_name in init_names or new_name in constants:
                k += 1
                new_name = f"{node.input[1]}__batch{k}"
            graph.initializer.append(numpy_helper.from_array(new.astype(np.int64), new_name))
            if out.ir_version < 4:  # initializers must also be graph inputs there
                graph.input.append(
                    onnx.helper.make_tensor_value_info(new_name, onnx.TensorProto.INT64, [len(new)])
                )
            init_names.add(new_name)
            constants[new_name] = new
            node.input[1] = new_name
            done.add(index)
            rewritten.append(node.name or f"Reshape #{index}")
            changed = True
        if not changed:
            break

    for output in graph.output:
        odims = shapes.get(output.name, [])
        if odims and isinstance(odims[0], int) and odims[0] != PROBE_BATCH:
            raise ModelError(
                f"{name}: output {output.name} stays batch {odims[0]} for a batch of "
                f"{PROBE_BATCH} (a constant shape other than a Reshape target fixes it)"
            )
    _drop_unused_initializers(out)
    try:
        onnx.checker.check_model(out)
    except Exception as exc:
        raise ModelError(
            f"{name}: the batch-dynamic graph is not valid: {_one_line(exc)}"
        ) from None
    return out, tuple(rewritten)


def _sort_nodes(graph: Any, name: str) -> None:
    """Order the nodes topologically (stable), as onnx.checker and shape inference need:
    converters append nodes where they like (the FP16 converter's input Casts at the
    end), which ONNX Runtime accepts and the checker does not."""
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    available.add("")  # an omitted optional input
    pending = list(graph.node)
    ordered: list[Any] = []
    while pending:
        ready = [n for n in pending if all(i in available for i in n.input)]
        if not ready:
            raise ModelError(f"{name}: the graph has a cycle or an input no node makes")
        ready_ids = {id(n) for n in ready}
        pending = [n for n in pending if id(n) not in ready_ids]
        for node in ready:
            ordered.append(node)
            available.update(node.output)
    if [id(n) for n in ordered] != [id(n) for n in graph.node]:
        copies = [type(n)() for n in ordered]
        for copy, node in zip(copies, ordered, strict=True):
            copy.CopyFrom(node)
        del graph.node[:]
        graph.node.extend(copies)


def _drop_unused_initializers(model: Any) -> None:
    """Remove the initializers no node reads any more (the old Reshape targets)."""
    used = {name for node in model.graph.node for name in node.input}
    used |= {o.name for o in model.graph.output}
    graph_inputs = {i.name for i in model.graph.input}
    keep = [i for i in model.graph.initializer if i.name in used or i.name in graph_inputs]
    if len(keep) != len(model.graph.initializer):
        del model.graph.initializer[:]
        model.graph.initializer.extend(keep)


# ---- verification --------------------------------------------------------------------------


def _session(path: Path, threads: int | None) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.intra_op_num_threads = threads or 0
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        return ort.InferenceSession(
            str(path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        raise ModelError(f"ONNX Runtime cannot load {path.name}: {_one_line(exc)}") from None


_ORT_DTYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16}


def verify_batch(
    original: Path, variant: Path, spec: ModelSpec, threads: int | None = None
) -> None:
    """ModelError unless ``variant`` on a batch of VERIFY_BATCH different inputs gives what
    ``original`` gives on each of them alone (ONNX Runtime, CPU)."""
    ref, test = _session(original, threads), _session(variant, threads)
    inp = ref.get_inputs()[0]
    dtype = _ORT_DTYPES.get(str(inp.type))
    if dtype is None:
        raise ModelError(f"{spec.name}: a batch variant needs a float input, not {inp.type}")
    h, w = spec.input_size
    shape = [d if isinstance(d, int) else s for d, s in zip(inp.shape, (1, 3, h, w), strict=False)]
    rng = np.random.default_rng(20261201)
    scale = 255.0 * spec.input_scale
    items = [(rng.random(shape) * scale).astype(dtype) for _ in range(VERIFY_BATCH)]
    try:
        alone = [ref.run(None, {inp.name: x}) for x in items]
        together = test.run(None, {test.get_inputs()[0].name: np.concatenate(items)})
    except Exception as exc:
        raise ModelError(
            f"{spec.name}: the batch-dynamic graph does not run a batch of {VERIFY_BATCH}: "
            f"{_one_line(exc)}"
        ) from None
    names = [o.name for o in ref.get_outputs()]
    for k, (name, got) in enumerate(zip(names, together, strict=True)):
        want = np.concatenate([np.asarray(a[k]) for a in alone])
        if got.shape != want.shape:
            raise ModelError(
                f"{spec.name}: output {name} of a batch of {VERIFY_BATCH} is "
                f"{list(got.shape)}, not {list(want.shape)}: the graph mixes its batch"
            )
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        bound = VERIFY_TOLERANCE * max(float(np.abs(want).max(initial=0.0)), 1e-3)
        if diff.size and float(diff.max()) > bound:
            raise ModelError(
                f"{spec.name}: output {name} of a batch of {VERIFY_BATCH} differs from the "
                f"frames run alone by {float(diff.max()):.3g}: the graph mixes its batch"
            )


# ---- the cached variant --------------------------------------------------------------------


def _stem(spec: ModelSpec) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", spec.name)[:40] or "model"


def _file_sha256(path: Path) -> str | None:
    h = hashlib.sha256()
    try:
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return None
    return h.hexdigest()


def _source_precision(path: Path) -> str:
    """The precision of the graph the variant is made of (a precision variant's, or fp32)."""
    meta = read_entry(path.parent) if path.name == MODEL_FILE else None
    precision = meta.get("precision") if meta else None
    return precision if isinstance(precision, str) else "fp32"


def _cached(entry: Path) -> dict[str, Any] | None:
    """The entry's metadata when it is complete and its model file is the one written."""
    meta = read_entry(entry)
    if meta is None or meta.get("kind") != "batch":
        return None
    if _file_sha256(entry / MODEL_FILE) != meta.get("variant_sha256"):
        return None
    return meta


def prepare_batch_variant(
    spec: ModelSpec,
    *,
    cache_dir: str | Path | None = None,
    threads: int | None = None,
) -> BatchVariant:
    """The batch-dynamic variant of ``spec``'s graph, from the cache or made now (see the
    module doc); ``spec`` itself when its graph's batch is already dynamic."""
    model_hash = model_sha256(spec.path)
    key = digest("batch-dynamic", REWRITE_VERSION, model_hash)
    if graph_batch(spec.path) is None:
        return BatchVariant(spec, model_hash, from_cache=False)
    entry = variants_dir(cache_dir) / f"{_stem(spec)}-batch-{key[:16]}"
    if _cached(entry) is not None:
        return BatchVariant(replace(spec, path=entry / MODEL_FILE), key, True, _rewritten(entry))
    if entry.exists():  # incomplete or corrupted: make it again
        shutil.rmtree(entry, ignore_errors=True)
    import onnx

    model = _load(spec.path)
    variant, rewritten = make_batch_dynamic(model, spec.name)
    with staging(entry) as stage:
        path = stage.path / MODEL_FILE
        try:
            onnx.save(variant, str(path))
        except Exception as exc:
            raise ModelError(f"{spec.name}: cannot write the batch variant: {exc}") from None
        verify_batch(spec.path, path, spec, threads)
        entry = stage.commit(
            {
                "kind": "batch",
                "key": key,
                "precision": _source_precision(spec.path),
                "model_sha256": model_hash,
                "source_model": str(spec.path),
                "rewrite_version": REWRITE_VERSION,
                "rewritten_reshapes": list(rewritten),
                "variant_sha256": _file_sha256(path),
            }
        )
    return BatchVariant(replace(spec, path=entry / MODEL_FILE), key, False, tuple(rewritten))


def _rewritten(entry: Path) -> tuple[str, ...]:
    meta = read_entry(entry) or {}
    return tuple(str(n) for n in meta.get("rewritten_reshapes", []))


def batch_variant(
    spec: ModelSpec,
    *,
    cache_dir: str | Path | None = None,
    threads: int | None = None,
) -> ModelSpec:
    """The ModelSpec of ``spec``'s batch-dynamic graph: ``spec`` when its batch is already
    dynamic, else the cached (or freshly made and verified) rewrite. ModelError (one line)
    when the graph cannot be made batch-dynamic safely."""
    return prepare_batch_variant(spec, cache_dir=cache_dir, threads=threads).spec
