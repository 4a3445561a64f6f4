"""Make TensorRT 10's published stubs (tensorrt-stubs) readable by mypy.

The generated tensorrt_bindings/tensorrt.pyi does not parse as published: plugin
methods name a parameter ``in`` (a keyword; renamed ``in_``), and some signatures put
a parameter without a default after ones with defaults (given ``= ...``, as a stub
may). Run after ``pip install --no-deps tensorrt-stubs`` (installer/test.sh does both).
"""

from __future__ import annotations

import ast
import pathlib
import re
import sysconfig

DEF = re.compile(r"^(\s*def \w+\()(.*)(\)\s*->.*:\s*)$")


def split_params(text: str) -> list[str]:
    """Top-level comma split of a parameter list (brackets nest)."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return parts


def fix_line(line: str) -> str:
    m = DEF.match(line)
    if not m:
        return line
    params, seen_default = [], False
    for p in split_params(m.group(2)):
        name = p.strip()
        if name.startswith("in:"):
            p = p.replace("in:", "in_:", 1)
        if name.startswith("*"):
            seen_default = False
        elif "=" in name:
            seen_default = True
        elif seen_default:
            p = f"{p} = ..."
        params.append(p)
    return m.group(1) + ",".join(params) + m.group(3)


stub = pathlib.Path(sysconfig.get_paths()["purelib"]) / "tensorrt_bindings" / "tensorrt.pyi"
lines = stub.read_text(encoding="utf-8").splitlines(keepends=True)
fixed = [
    fix_line(line.rstrip("\n")) + "\n" if line.lstrip().startswith("def ") else line
    for line in lines
]
changed = sum(a != b for a, b in zip(lines, fixed, strict=True))
text = "".join(fixed)
ast.parse(text)  # it parses now, or this says where it does not
stub.write_text(text, encoding="utf-8")
print(f"tensorrt-stubs: {changed} signature(s) made parseable")
