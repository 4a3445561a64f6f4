"""Build the shipped PTX of FrameLens' kernels from the .cu sources (needs nvcc).

    python kernels/build.py            rebuild every stale kernels/<name>.ptx
    python kernels/build.py --all      rebuild all of them
    python kernels/build.py --check    exit 1 if a shipped PTX is stale or missing
    python kernels/build.py --report   also build sm_90 cubins (-Xptxas -v) and print
                                       registers, stack and spills per kernel

The .cu sources are the truth; the PTX (virtual architecture compute_75, so any
GPU from Turing on can load it through the driver) serves machines without nvcc.
Its first line records the sha256 of the sources it was built from, which
framelens.core.gpu.kernels checks before loading it and tests/unit checks in CI.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from framelens.core.gpu.kernels import (
    KERNEL_SOURCES,
    NVCC_OPTIONS,
    PTX_ARCH,
    PTX_HEADER,
    find_nvcc,
    nvcc_version,
    ptx_digest,
    source_digest,
)

HERE = Path(__file__).resolve().parent
REPORT_ARCH = "sm_90"


def build_ptx(nvcc: str, name: str, directory: Path = HERE) -> Path:
    """Compile ``<name>.cu`` to PTX and write it with the source digest as first line."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / f"{name}.ptx"
        subprocess.run(
            [
                nvcc,
                *NVCC_OPTIONS,
                "-Werror",
                "all-warnings",
                "-ptx",
                f"-arch={PTX_ARCH}",
                "-I",
                str(directory),
                "-o",
                str(out),
                str(directory / f"{name}.cu"),
            ],
            check=True,
        )
        body = out.read_text(encoding="utf-8")
    header = (
        f"{PTX_HEADER} {source_digest(name, directory)}\n"
        f"// built from {name}.cu by kernels/build.py: nvcc {' '.join(NVCC_OPTIONS)} "
        f"-ptx -arch={PTX_ARCH} ({nvcc_version(nvcc)})\n"
    )
    target = directory / f"{name}.ptx"
    target.write_text(header + body, encoding="utf-8", newline="\n")
    return target


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGS = re.compile(r"Used (\d+) registers")


def resource_report(nvcc: str, name: str, arch: str = REPORT_ARCH, directory: Path = HERE) -> str:
    """ptxas' resource usage of every kernel in ``<name>.cu`` for ``arch``, one line each."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                nvcc,
                *NVCC_OPTIONS,
                "-Werror",
                "all-warnings",
                "-cubin",
                f"-arch={arch}",
                "-Xptxas",
                "-v",
                "-I",
                str(directory),
                "-o",
                str(Path(tmp) / f"{name}.cubin"),
                str(directory / f"{name}.cu"),
            ],
            check=True,
            capture_output=True,
            text=True,
        )
    lines: list[str] = []
    entry, frame = "", ""
    for line in done.stderr.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
        elif m := _FRAME.search(line):
            frame = f"stack {m.group(1)} B, spills {m.group(2)}/{m.group(3)} B"
        elif (m := _REGS.search(line)) and entry:
            lines.append(f"{name}.cu {entry} ({arch}): {m.group(1)} registers, {frame}")
            entry = ""
    return "\n".join(lines)


def stale(name: str, directory: Path = HERE) -> bool:
    path = directory / f"{name}.ptx"
    return not path.is_file() or ptx_digest(path.read_bytes()) != source_digest(name, directory)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="only check the shipped PTX")
    parser.add_argument("--all", action="store_true", help="rebuild even up-to-date PTX")
    parser.add_argument("--report", action="store_true", help=f"print {REPORT_ARCH} resources")
    args = parser.parse_args(argv)

    if args.check:
        bad = [n for n in KERNEL_SOURCES if stale(n)]
        for n in bad:
            print(f"stale or missing: {n}.ptx (run python kernels/build.py)")
        return 1 if bad else 0
    nvcc = find_nvcc()
    if nvcc is None:
        print("nvcc not found (PATH, CUDA_HOME, /usr/local/cuda)", file=sys.stderr)
        return 2
    for name in KERNEL_SOURCES:
        if args.all or stale(name):
            print(f"built {build_ptx(nvcc, name).name}")
        if args.report:
            print(resource_report(nvcc, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
