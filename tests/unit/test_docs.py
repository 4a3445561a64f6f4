"""The documents a newcomer reads hold true: the README's test command is what CI runs,
every command line shown in the README and docs/cli.md is one `framelens` accepts,
docs/cli.md names every command and option the parser has, and the links, images and
benchmark results the pages name exist."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest
from framelens.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLI_DOC = ROOT / "docs" / "cli.md"
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
PAGES = (README, CLI_DOC, BENCHMARKS_DOC, ROOT / "docs" / "screenshots.md")


def code_lines(page: Path) -> list[str]:
    """The lines of a page's indented code blocks, without their trailing comments."""
    return [
        line.strip().split("  #", 1)[0].strip()
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("    ") and line.strip()
    ]


def commands(parser: argparse.ArgumentParser) -> list[tuple[str, argparse.ArgumentParser]]:
    """Every subcommand, nested ones included ("engines build"), with its parser."""
    (top,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    stack, found = list(top.choices.items()), []
    while stack:
        name, sub = stack.pop()
        found.append((name, sub))
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack += [(f"{name} {n}", p) for n, p in action.choices.items()]
    return found


def test_the_readme_test_command_is_what_ci_runs() -> None:
    assert "bash installer/test.sh" in code_lines(README)
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "bash installer/test.sh" in ci
    assert "bash installer/setup.sh --run" in [
        line.split("  #")[0].strip() for line in code_lines(README)
    ]


@pytest.mark.parametrize("page", [README, CLI_DOC], ids=lambda p: p.name)
def test_every_example_command_line_parses(page: Path) -> None:
    """A concrete example (not a synopsis with [options] or a|b) is accepted by the parser."""
    examples = [
        line
        for line in code_lines(page)
        if re.match(r"(\.venv/bin/)?framelens( |$)", line)
        and not any(mark in line for mark in ("[", "|", "...", "…"))
    ]
    assert len(examples) >= (1 if page is README else 10)
    parser = build_parser()
    for line in examples:
        try:
            parser.parse_args(shlex.split(line)[1:])
        except SystemExit as exc:  # argparse's way of refusing a line
            pytest.fail(f"{page.name}: `{line}` is refused by the parser ({exc})")


def test_the_cli_reference_names_every_command_and_option() -> None:
    text = CLI_DOC.read_text(encoding="utf-8")
    parser = build_parser()
    for name, sub in [("", parser), *commands(parser)]:
        if name:
            assert f"framelens {name}" in text, f"docs/cli.md lacks the command {name}"
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--") and option != "--help":
                    assert f"`{option}" in text, f"docs/cli.md lacks framelens {name} {option}"
            for choice in action.choices or ():
                if not isinstance(action, argparse._SubParsersAction):
                    assert str(choice) in text, f"docs/cli.md lacks {action.dest}: {choice}"


def test_links_images_and_results_the_pages_name_exist() -> None:
    missing = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or a heading of the same page
            if not (page.parent / target.split("#", 1)[0]).exists():
                missing.append(f"{page.name}: {target}")
    results = BENCHMARKS_DOC.read_text(encoding="utf-8")
    for name in set(re.findall(r"`(?:benchmarks/results/)?([\w.-]+\.json)`", results)):
        if not (ROOT / "benchmarks" / "results" / name).is_file():
            missing.append(f"benchmarks.md: {name}")
    assert not missing, f"named but not there: {missing}"
