"""What the host and the GPU were doing during a run: sampled on a thread of its own.

    with HostMonitor() as mon:
        ...                      # a run, its processes children of this one
    mon.report(since=t0)         # per-process CPU, the host's CPU, GPU and decoder use

Per process (this one and its children, Linux /proc): CPU time per second of wall time
in percent of one core; a process near 100% of one core while the GPU waits is the mark
of one Python lock (the GIL) at its limit. The host: every core's busy share. The GPU:
its utilization and NVDEC's (pynvml where it imports, else ``nvidia-smi``; None where
neither is there). Samples carry ``time.perf_counter()`` stamps, so a report can keep
only a window (``since``/``until``), e.g. the frames a benchmark measures.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["HostMonitor", "machine"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_times() -> dict[int, tuple[str, float]]:
    """This process and its children: pid -> (name, CPU seconds so far)."""
    me = os.getpid()
    out: dict[int, tuple[str, float]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        pid, ppid = int(entry.name), int(fields[1])
        if pid == me or ppid == me:
            out[pid] = (name, (int(fields[11]) + int(fields[12])) / _TICK)
    return out


def _host_times() -> tuple[float, float]:
    """(busy, total) jiffies of every core, /proc/stat."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0.0, 0.0
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return float(sum(values) - idle), float(sum(values))


class _Gpu:
    """GPU and decoder utilization in percent, or None where nothing can tell."""

    def __init__(self, index: int = 0) -> None:
        self.how = "none"
        self._nvml: Any = None
        try:
            import pynvml  # type: ignore[import-not-found]

            pynvml.nvmlInit()
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            self._nvml, self.how = pynvml, "pynvml"
        except Exception:
            self._smi = shutil.which("nvidia-smi")
            self._index = index
            if self._smi:
                self.how = "nvidia-smi"

    def sample(self) -> tuple[float | None, float | None]:
        if self._nvml is not None:
            try:
                gpu = float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu)
                dec = float(self._nvml.nvmlDeviceGetDecoderUtilization(self._handle)[0])
                return gpu, dec
            except Exception:
                return None, None
        if self.how != "nvidia-smi":
            return None, None
        return self._smi_query("utilization.gpu"), self._smi_query("utilization.decoder")

    def _smi_query(self, field: str) -> float | None:
        """One field of ``nvidia-smi --query-gpu`` (None where this driver lacks it)."""
        try:
            text = subprocess.run(
                [str(self._smi), "-i", str(self._index), f"--query-gpu={field}",
                 "--format=csv,noheader,nounits"],
                capture_output=True, text=True, timeout=5, check=True,
            ).stdout.strip()  # fmt: skip
            return float(text.splitlines()[0])
        except Exception:
            return None


class HostMonitor:
    """Samples every ``every_s`` seconds while entered (see the module)."""

    def __init__(self, every_s: float = 1.0, gpu_index: int | None = 0) -> None:
        self.every_s = every_s
        self._gpu = _Gpu(gpu_index) if gpu_index is not None else None
        self.samples: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="host-monitor", daemon=True)
        self.cores = os.cpu_count() or 1

    def __enter__(self) -> HostMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        last_t, last_procs, last_host = time.perf_counter(), _proc_times(), _host_times()
        while not self._stop.wait(self.every_s):
            now, procs, host = time.perf_counter(), _proc_times(), _host_times()
            dt = now - last_t
            cpu = {
                pid: round(100.0 * (secs - last_procs[pid][1]) / dt, 1)
                for pid, (_, secs) in procs.items()
                if pid in last_procs and dt > 0
            }
            total = host[1] - last_host[1]
            gpu, dec = self._gpu.sample() if self._gpu is not None else (None, None)
            self.samples.append({
                "t": now,
                "process_cpu_pct": cpu,
                "names": {pid: name for pid, (name, _) in procs.items()},
                "host_cpu_pct": round(100.0 * (host[0] - last_host[0]) / total, 1)
                if total > 0 else None,
                "gpu_pct": gpu,
                "decoder_pct": dec,
            })  # fmt: skip
            last_t, last_procs, last_host = now, procs, host

    def report(self, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        """Medians (and maxima) over the samples in [since, until]."""
        kept = [
            s for s in self.samples
            if (since is None or s["t"] >= since) and (until is None or s["t"] <= until)
        ]  # fmt: skip
        me = os.getpid()
        per: dict[int, list[float]] = {}
        for s in kept:
            for pid, pct in s["process_cpu_pct"].items():
                per.setdefault(pid, []).append(pct)
        processes = [
            {"pid": pid, "this": pid == me, "cpu_pct_median": round(statistics.median(v), 1),
             "cpu_pct_max": max(v)}
            for pid, v in sorted(per.items())
        ]  # fmt: skip

        def med(key: str) -> float | None:
            values = [s[key] for s in kept if s[key] is not None]
            return round(statistics.median(values), 1) if values else None

        def top(key: str) -> float | None:
            values = [s[key] for s in kept if s[key] is not None]
            return max(values) if values else None

        return {
            "samples": len(kept),
            "every_s": self.every_s,
            "cores": self.cores,
            "host_cpu_pct_median": med("host_cpu_pct"),
            "host_cpu_pct_max": top("host_cpu_pct"),
            "gpu_pct_median": med("gpu_pct"),
            "gpu_pct_max": top("gpu_pct"),
            "decoder_pct_median": med("decoder_pct"),
            "decoder_pct_max": top("decoder_pct"),
            "gpu_meter": self._gpu.how if self._gpu is not None else "none",
            "processes": processes,
        }


def machine() -> dict[str, Any]:
    """Which GPU and driver (nvidia-smi), the host's cores and the commit measured (git),
    each None where it cannot be told."""
    gpu = None
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            gpu = subprocess.run(
                [smi, "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=10, check=True,
            ).stdout.strip().splitlines()[0]  # fmt: skip
        except Exception:
            gpu = None
    commit = None
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
            check=True, cwd=Path(__file__).resolve().parent,
        ).stdout.strip() or None  # fmt: skip
    except Exception:
        commit = None
    return {"gpu": gpu, "cores": os.cpu_count(), "commit": commit}
