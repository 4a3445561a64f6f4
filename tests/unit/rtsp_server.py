"""A real RTSP server for the stream tests: tests/unit/rtsp_server_main.py in a process of
the system Python. ``stop()`` kills it (the stream is cut), ``start()`` brings it back on
the same port, ``stall()``/``resume()`` freeze and thaw it (SIGSTOP/SIGCONT: connections
stay open, nothing is sent). ``unavailable()`` says why it cannot run here (no
GStreamer RTSP server installed: installer/setup.sh --dev installs it on Debian)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEM_PYTHON = "/usr/bin/python3"


def unavailable() -> str | None:
    probe = (
        "import gi; gi.require_version('Gst', '1.0'); gi.require_version('GstRtspServer', '1.0');"
        " from gi.repository import Gst, GstRtspServer; Gst.init(None);"
        " assert Gst.ElementFactory.find('rtph264pay') and Gst.ElementFactory.find('qtdemux')"
    )
    if not Path(SYSTEM_PYTHON).exists():
        return f"{SYSTEM_PYTHON} not found"
    done = subprocess.run(
        [SYSTEM_PYTHON, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    if done.returncode != 0:
        return "GStreamer's RTSP server is not installed (gir1.2-gst-rtsp-server-1.0, python3-gi)"
    return None


class RtspServer:
    def __init__(self, video: Path) -> None:
        self.video = video
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"rtsp://127.0.0.1:{self.port}/live"

    def start(self) -> None:
        proc = subprocess.Popen(
            [SYSTEM_PYTHON, str(HERE / "rtsp_server_main.py"), str(self.video), str(self.port)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "PORT n" once listening
        if not line.startswith("PORT "):
            proc.kill()
            raise RuntimeError(f"RTSP server did not start: {line!r} {proc.stderr.read()!r}")
        self.port = int(line.split()[1])
        self._proc = proc

    def stop(self) -> None:
        if self._proc is not None:
            self.resume()
            self._proc.kill()
            self._proc.wait(10)
            self._proc = None
            time.sleep(0.1)  # the port is free again for start()

    def stall(self) -> None:
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self._proc is not None:
            os.kill(self._proc.pid, signal.SIGCONT)
