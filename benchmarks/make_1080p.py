"""A 1080p H.264 yuv420p test video made from real footage: the person sample scaled up.

    python benchmarks/make_1080p.py OUT.mp4 [--frames 900]

The sample (768x432, 30 fps, CC BY 4.0, see resources/samples/ATTRIBUTION.md) is
read with PyAV, scaled to 1920x1080 with OpenCV and encoded with libx264; it loops
when more frames are asked for than it has.
"""

from __future__ import annotations

import argparse
import sys
from fractions import Fraction
from pathlib import Path

import av
import cv2

SAMPLE = Path(__file__).resolve().parents[1] / "resources/samples/one-by-one-person-detection.mp4"


def make_1080p(
    dst: str | Path,
    frames: int = 900,
    src: str | Path = SAMPLE,
    size: tuple[int, int] = (1920, 1080),
) -> Path:
    """``frames`` frames of ``src`` scaled to ``size`` (width, height), looped as needed."""
    dst = Path(dst)
    tmp = dst.with_name(f".{dst.stem}.partial{dst.suffix}")
    with av.open(str(tmp), "w") as out:
        stream = out.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = *size, "yuv420p"
        stream.options = {"crf": "20", "preset": "veryfast", "g": "60"}
        stream.time_base = Fraction(1, 30)
        written = 0
        while written < frames:
            with av.open(str(src)) as inp:
                for frame in inp.decode(video=0):
                    if written >= frames:
                        break
                    big = cv2.resize(frame.to_ndarray(format="bgr24"), size)
                    vf = av.VideoFrame.from_ndarray(big, format="bgr24")
                    vf.pts = written
                    vf.time_base = Fraction(1, 30)
                    for packet in stream.encode(vf):
                        out.mux(packet)
                    written += 1
        for packet in stream.encode():
            out.mux(packet)
    tmp.replace(dst)
    return dst


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("output")
    parser.add_argument("--frames", type=int, default=900)
    args = parser.parse_args()
    print(make_1080p(args.output, args.frames))
    return 0


if __name__ == "__main__":
    sys.exit(main())
