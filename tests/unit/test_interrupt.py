"""A stopping executor ends its workers' long engine calls (ESRGAN on the CPU held a
closing wall for 30 s): real ONNX Runtime runs of a real graph, long because it is a
chain of many nodes, on frames of the real sample through the real executor."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import pytest
from framelens.core.interrupt import Interrupted, InterruptibleCalls, interruptible
from framelens.core.pipeline.execute import Decoded, Executor
from framelens.core.stages.engines.onnxruntime_cpu import OnnxRuntimeEngine
from framelens.core.stages.sources import open_source
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "resources" / "samples" / "one-by-one-person-detection.mp4")
NODES = 600  # MatMuls by 512x512: a LONG input takes ~40 s a run on one core, a SHORT
LONG, SHORT = (1, 24, 512, 512), (1, 1, 4, 512)  # one next to nothing


@pytest.fixture(scope="module")
def chain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A graph of many nodes (ONNX Runtime checks for an end between two nodes)."""
    weight = numpy_helper.from_array(np.eye(512, dtype=np.float32), "w")
    nodes, prev = [], "input"
    for i in range(NODES):
        nodes.append(helper.make_node("MatMul", [prev, "w"], [f"y{i}"]))
        prev = f"y{i}"
    nodes.append(helper.make_node("Identity", [prev], ["output"]))
    shape = ["n", "c", "h", 512]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, shape)],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("chain") / "chain.onnx"
    onnx.save(model, str(path))
    return path


def tensor(shape: tuple[int, ...] = SHORT) -> np.ndarray:
    return np.random.default_rng(0).random(shape, dtype=np.float32)


class LongCall:
    """An executor worker whose every batch is one long engine call (far longer than a
    loaded machine may take to stop it); it records how each call ended."""

    def __init__(self, engine: OnnxRuntimeEngine) -> None:
        self.engine = engine
        self.calling = threading.Event()
        self.ended: list[str] = []

    def run(self, batch: Sequence[Decoded]) -> list[int]:
        self.calling.set()
        try:
            self.engine.infer(tensor(LONG))
        except Interrupted:
            self.ended.append("interrupted")
            raise
        self.ended.append("finished")
        return [frame.index for frame, _ in batch]

    def update(self, **changes: object) -> None:
        pass

    def close(self) -> None:
        self.engine.close()


def test_a_stopping_executor_ends_the_engine_call_under_way_and_drops_its_batch(
    chain: Path,
) -> None:
    worker = LongCall(OnnxRuntimeEngine(chain, threads=1))
    executor: Executor[int] = Executor.open(open_source(SAMPLE), [worker])
    try:
        assert worker.calling.wait(30)
        assert executor.stop_workers()  # the worker's thread is done
        assert worker.ended == ["interrupted"]  # its call did not run to its end
        assert executor.get(0.1) is None  # and nothing of its batch is handed out
    finally:
        executor.close(close_source=True)
    # the engine is whole: a call outside any worker runs to its end, and right
    x = tensor()
    assert np.allclose(worker.engine.infer(x)[0], x)
    worker.close()


def test_only_the_calls_of_the_stopped_workers_end(chain: Path) -> None:
    """The scope is the thread's: the same engine called elsewhere (a player showing one
    frame, the next executor's workers) is untouched; calls of stopped workers that
    start after the stop end at once."""
    engine = OnnxRuntimeEngine(chain, threads=1)
    try:
        stopped = InterruptibleCalls()
        stopped.interrupt()
        with interruptible(stopped), pytest.raises(Interrupted):
            engine.infer(tensor())
        with interruptible(InterruptibleCalls()):  # the next set of workers
            assert engine.infer(tensor())[0].shape == SHORT
        assert engine.infer(tensor())[0].shape == SHORT  # no workers at all
    finally:
        engine.close()


def test_a_failed_run_is_still_an_engine_error_not_an_interruption(chain: Path) -> None:
    from framelens.core.errors import EngineError

    engine = OnnxRuntimeEngine(chain, threads=1)
    try:
        with interruptible(InterruptibleCalls()), pytest.raises(EngineError):
            engine.infer(np.zeros((1, 1, 4, 256), dtype=np.float32))  # not 512 wide
    finally:
        engine.close()
