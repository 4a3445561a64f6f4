"""An RTSP server on 127.0.0.1 (GStreamer's gst-rtsp-server), run by the system Python
(Debian's python3-gi; the test venv has no GObject bindings): tests/unit/rtsp_server.py
starts it as a process. It serves an H.264 MP4 at rtsp://127.0.0.1:PORT/live, in a loop,
at the file's own rate; PORT 0 picks one. Prints "PORT <n>" once listening.

    /usr/bin/python3 tests/unit/rtsp_server_main.py FILE.mp4 PORT
"""

import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402


def main() -> int:
    path, port = sys.argv[1], sys.argv[2]
    Gst.init(None)
    server = GstRtspServer.RTSPServer.new()
    server.set_address("127.0.0.1")
    server.set_service(port)
    factory = GstRtspServer.RTSPMediaFactory.new()
    factory.set_launch(
        f"( multifilesrc location={path} loop=true ! qtdemux ! h264parse"
        " ! rtph264pay name=pay0 pt=96 config-interval=1 )"
    )
    factory.set_shared(True)
    server.get_mount_points().add_factory("/live", factory)
    if server.attach(None) == 0:
        print(f"cannot listen on 127.0.0.1:{port}", file=sys.stderr, flush=True)
        return 1
    print(f"PORT {server.get_bound_port()}", flush=True)
    GLib.MainLoop().run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
