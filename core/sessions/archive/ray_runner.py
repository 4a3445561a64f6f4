"""A batch on Ray: one actor per worker (a GPU share each, ``num_gpus``, when the device
is CUDA, else one CPU), each keeping its engine loaded across the jobs it is given
(core/sessions/archive/jobs.py), one job at a time per actor.

Progress and cancel go through a small hub actor: a worker reports each job's frames
(at most ten times a second) and the answer says whether the batch was cancelled; the
driver drains the reports while it waits for results. A worker whose process dies is
restarted by Ray and its job run again from the start (``max_restarts``,
``max_task_retries``); what the dead process was writing was a temporary file, removed
by the next writer of the same output. Ray is imported here only, when a batch asks
for it, so ``framelens run`` and the GUI never load it.

The model travels with the batch: the driver reads it (the prepared FP16/INT8 variant,
or the user's file, with its external data and sidecar: core/models/shipping.py) before
it reaches the cluster, puts it in Ray's object store once, and each actor writes it
into its own node's cache (keyed by its hash, reused when there) and loads it from
there, so that no node needs the driver's model path. Inputs and outputs still need the
same paths on every node.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from framelens.core.errors import ConfigError, error_message
from framelens.core.models.shipping import PackedModel, materialise, pack_model
from framelens.core.pipeline.settings import PipelineSettings
from framelens.core.sessions.archive.jobs import Job, JobResult, JobRunner
from framelens.core.sessions.archive.progress import InputTracker
from framelens.core.stages.source_stages import StageFactory

log = logging.getLogger(__name__)

RESTARTS = 3
"""How often a worker's process may die (and be restarted, its job retried)."""
CANCEL_WAIT_S = 60.0
HUB = "hub"  # the hub actor's name in the batch's namespace
"""How long a cancelled batch waits for its workers to stop before killing them."""


class _Hub:
    """Progress reports from the workers, the batch's cancel flag, and where the model
    the driver shipped is (a Ray actor)."""

    def __init__(self, model: list[Any]) -> None:
        self.events: list[tuple[str, str, int, int]] = []
        self.cancelled = False
        self.model = model  # [its ObjectRef]: in a list, Ray passes the reference itself

    def shipped(self) -> list[Any]:
        return self.model

    def report(self, worker: str, path: str, segment: int, done: int) -> bool:
        self.events.append((worker, path, segment, done))
        return self.cancelled

    def drain(self) -> list[tuple[str, str, int, int]]:
        events, self.events = self.events, []
        return events

    def cancel(self) -> None:
        self.cancelled = True


class _Worker:
    """One Ray actor: a JobRunner (its model written into this node's cache from
    the one the driver shipped) and the hub it reports to."""

    def __init__(
        self,
        settings: PipelineSettings,
        namespace: str,
        name: str,
        stages: StageFactory | None = None,
    ) -> None:
        # found by name, as is the model through it: a handle or an object among the
        # constructor's arguments would live in the object store, which Ray cannot
        # promise for an actor's restarts
        import ray

        self.hub, self.name = ray.get_actor(HUB, namespace=namespace), name
        shipped: list[Any] = ray.get(self.hub.shipped.remote())
        packed: PackedModel = ray.get(shipped[0])
        settings = replace(settings, model=materialise(packed, settings.model))
        if settings.device.startswith("cuda"):
            settings = replace(settings, device="cuda:0")  # the GPU Ray gave this actor
            count = None
        else:
            count = 1  # one CPU per actor: one single-threaded inference worker
        self.processor: JobRunner = JobRunner(settings, workers=count, stages=stages)

    def pid(self) -> int:
        return os.getpid()

    def run(self, job: Job) -> JobResult:
        import ray

        cancel = threading.Event()

        def report(done: int, _total: int) -> None:
            if ray.get(self.hub.report.remote(self.name, job.path, job.segment.index, done)):
                cancel.set()

        report(0, job.frames_total)
        if cancel.is_set():
            return JobResult(job, cancelled=True)
        return self.processor.run(job, on_progress=report, cancel=cancel)


def connect(address: str) -> tuple[bool, str]:
    """Ray initialised for ``address`` ("local": a new local instance; "auto":
    RAY_ADDRESS or a cluster running here, else a local one; else the address of a
    cluster: ``ray://HEAD:10001`` or ``HEAD:6379``). Returns whether this call started
    it (so the batch shuts it down) and the address in words."""
    import ray

    if ray.is_initialized():
        return False, address
    options: dict[str, Any] = {
        "include_dashboard": False,
        "logging_level": logging.WARNING,
        "log_to_driver": False,
    }
    try:
        if address == "local":
            ray.init(**options)
        elif address == "auto":
            if os.environ.get("RAY_ADDRESS"):
                address = os.environ["RAY_ADDRESS"]
                ray.init(address=address, **options)
            else:
                try:
                    ray.init(address="auto", **options)
                except ConnectionError:
                    address = "local"
                    ray.init(**options)
        else:
            ray.init(address=address, **options)
    except Exception as exc:  # Ray's own errors: unreachable, version mismatch, ...
        raise ConfigError(f"cannot start or reach Ray at {address}: {error_message(exc)}") from None
    return True, address


def _worker_count(workers: int | None, on_gpu: bool, gpus_per_worker: float) -> int:
    import ray

    if workers is not None:
        if workers < 1:
            raise ConfigError(f"workers must be at least 1, not {workers}")
        return workers
    resources = ray.cluster_resources()  # type: ignore[no-untyped-call]
    if on_gpu:
        gpus = float(resources.get("GPU", 0))
        if gpus < gpus_per_worker:
            raise ConfigError(
                f"the Ray cluster has {gpus:g} GPUs, a worker needs {gpus_per_worker:g}"
            )
        return max(1, int(gpus // gpus_per_worker))
    return max(1, int(resources.get("CPU", 1)))


def run_on_ray(
    jobs: Sequence[Job],
    settings: PipelineSettings,
    tracker: InputTracker,
    cancel: threading.Event | None,
    *,
    address: str,
    gpus_per_worker: float = 1.0,
    workers: int | None = None,
    stages: StageFactory | None = None,
) -> tuple[bool, str]:
    """Run ``jobs`` on Ray actors; returns (cancelled, the cluster's address in words)."""
    import ray
    from ray.exceptions import RayError

    if gpus_per_worker <= 0:
        raise ConfigError(f"gpus per worker must be more than 0, not {gpus_per_worker:g}")
    packed = pack_model(settings.model)  # read before the cluster is reached
    started, address = connect(address)
    on_gpu = settings.device.startswith("cuda")
    actors: list[Any] = []
    hub: Any = None
    try:
        count = min(_worker_count(workers, on_gpu, gpus_per_worker), len(jobs))
        resources = {"num_gpus": gpus_per_worker, "num_cpus": 1} if on_gpu else {"num_cpus": 1}
        namespace = f"framelens-{os.getpid()}-{time.monotonic_ns()}"
        # the model once in the object store, each node fetching it once; held here until
        # the end, for the constructors of restarted actors
        model = ray.put(packed)
        hub = ray.remote(num_cpus=0)(_Hub).options(name=HUB, namespace=namespace).remote([model])
        worker_class = ray.remote(_Worker)
        names = [f"worker-{i + 1}" for i in range(count)]
        for name in names:
            actors.append(
                worker_class.options(
                    name=name,
                    namespace=namespace,
                    max_restarts=RESTARTS,
                    max_task_retries=RESTARTS,
                    max_concurrency=2,  # pid() answers while a job runs
                    **resources,
                ).remote(settings, namespace, name, stages)
            )
        return _schedule(jobs, tracker, cancel, actors, names, hub, RayError), address
    finally:
        for actor in actors:
            ray.kill(actor, no_restart=True)
        if hub is not None:
            ray.kill(hub, no_restart=True)
        if started:
            ray.shutdown()


def _schedule(
    jobs: Sequence[Job],
    tracker: InputTracker,
    cancel: threading.Event | None,
    actors: list[Any],
    names: list[str],
    hub: Any,
    ray_error: type[Exception],
) -> bool:
    """Give each idle actor the next job, collect results, pass progress on; True when
    cancelled."""
    import ray

    queue = deque(jobs)
    idle = deque(range(len(actors)))
    running: dict[Any, tuple[Job, int]] = {}
    cancelled_at: float | None = None
    while queue or running:
        if cancel is not None and cancel.is_set() and cancelled_at is None:
            cancelled_at = time.monotonic()
            hub.cancel.remote()
            while queue:  # never started: their inputs go back to pending
                tracker.finished(JobResult(queue.popleft(), cancelled=True), "")
        while idle and queue:
            job = queue.popleft()
            if not tracker.wanted(job):
                continue
            k = idle.popleft()
            running[actors[k].run.remote(job)] = (job, k)
            tracker.started(job, names[k])
        if not running:  # all done, or every worker died: what is left cannot run
            for job in queue:
                tracker.fail(job.path, "no Ray worker left to run it")
            break
        ready, _ = ray.wait(list(running), num_returns=1, timeout=0.2)
        for worker, path, segment, done in ray.get(hub.drain.remote()):
            for job, _k in running.values():
                if job.path == path and job.segment.index == segment:
                    tracker.progressed(job, done, worker)
        for ref in ready:
            job, k = running.pop(ref)
            try:
                result = ray.get(ref)
                idle.append(k)
            except ray_error as exc:  # the worker died more often than it may restart
                result = JobResult(job, error=f"{names[k]} failed: {error_message(exc)}")
            tracker.finished(result, names[k])
        if cancelled_at is not None and time.monotonic() - cancelled_at > CANCEL_WAIT_S:
            for job, _k in running.values():
                tracker.finished(JobResult(job, cancelled=True), "")
            break
    return cancelled_at is not None
