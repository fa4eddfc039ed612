"""Every console block in the README and docs/ either runs here, on the embedded default, and
prints what the page shows, or says why it cannot (``<!-- not run: … -->``: it needs a cluster,
three hosts, a team's own table).

A block that runs is marked ``<!-- example: NAME -->`` on the line before it. The blocks of
one page with the same NAME run in order in one fresh folder: ``examples`` is a copy of this
repository's ``examples/`` (the commands name ``--config examples/catchup.toml``), ``here``
a folder holding what ``examples/`` holds (its ``catchup.toml`` found by the commands), ``above``
a folder whose ``catchup.toml`` is the page's TOML block before the console block. Each
``$`` line runs as printed (``uv run catchup`` and ``catchup`` are this checkout's catchup; no
shell: a trailing ``> /dev/null`` drops stdout, and a pipe cannot be run here), on a console
80 columns wide and piped, stderr with stdout as a terminal shows them.

The examples run on a clock pinned to the day the pages were recorded (``PINNED``): an embedded
server of their own and every command they run start under libfaketime at that moment, so
which DST change is next, how long a window up to now is, and where a line of a table wraps
are the page's on any day the suite runs (issue 47: from 2027-03-29 the doctor's next DST
change and the tutorial's wrapping differed). What may still differ from one run or machine to
the next is made the same on both sides before they are compared: dates and times, durations,
numbers, paths, the names of the databases made per project, the host's name, widths of table
columns, and where lines wrap (the two are compared word for word). On the page, a line ``…``
stands for any lines, and ``…`` inside a line for any text. ``CATCHUP_UPDATE_DOCS=1`` writes
what ran into the pages (then put the ``…`` back where a page shortens the output)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fix_db import own_home, reachable_place
from paths import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
GENERATED = {ROOT / "docs" / "reference" / "cli.md"}  # --help itself, checked by test_docs
FENCE = re.compile(r"^(?P<indent> *)```console\s*$")
RUNS = re.compile(r"<!-- example: (?P<name>[\w-]+) -->")
SCENARIOS = ("examples", "here", "above")
NOT_RUN = re.compile(r"<!-- not run: (?P<why>.+?) -->")

# The moment the examples' clock starts at, whatever the day: the pages were recorded then.
PINNED = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@dataclass
class Block:
    page: Path
    line: int  # of the fence, counted from 1
    indent: int
    lines: list[str]  # between the fences, indentation removed
    scenario: str | None  # the NAME of ``example: NAME``; None: not run
    config: str | None = None  # the TOML block above it, for ``above``
    end: int = 0  # the line of the closing fence

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


@dataclass
class Step:
    command: str  # as printed, after ``$ ``
    expected: list[str] = field(default_factory=list)


def blocks(page: Path) -> list[Block]:
    text = page.read_text().splitlines()
    found: list[Block] = []
    last_toml: list[str] | None = None
    n = 0
    while n < len(text):
        line = text[n]
        if line.strip() == "```toml":
            end = next(k for k in range(n + 1, len(text)) if text[k].strip() == "```")
            last_toml = [t.strip("\n") for t in text[n + 1 : end]]
            n = end + 1
            continue
        match = FENCE.match(line)
        if not match:
            n += 1
            continue
        indent = len(match["indent"])
        end = next(k for k in range(n + 1, len(text)) if text[k].strip() == "```")
        before = next((text[k] for k in range(n - 1, -1, -1) if text[k].strip()), "")
        runs = RUNS.search(before)
        if runs is None and NOT_RUN.search(before) is None:
            raise AssertionError(
                f"{page.relative_to(ROOT)}:{n + 1}: a console block needs "
                "<!-- example: NAME --> or <!-- not run: why --> on the line before it"
            )
        body = [t[indent:] for t in text[n + 1 : end]]
        found.append(
            Block(
                page,
                n + 1,
                indent,
                body,
                None if runs is None else runs["name"],
                "\n".join(last_toml) + "\n" if last_toml is not None else None,
                end + 1,
            )
        )
        n = end + 1
    return found


def steps(block: Block) -> list[Step]:
    found: list[Step] = []
    for line in block.lines:
        if line.startswith("$ "):
            found.append(Step(line[2:]))
        else:
            assert found, f"{block.where}: output before the first command"
            found[-1].expected.append(line)
    return found


# What differs from one day, machine or run to the next, made the same on both sides.
_DURATION = r"(?:\d+(?:\.\d+)?(?:ms|[wdhms]))+"
_NORMAL = [
    (re.compile(r"started it; "), ""),
    (re.compile(r"catchup_[a-z0-9_]*?_[0-9a-f]{8}\b"), "DB"),
    (re.compile(r"(?<![\w.~])/[^\s,;:()'\"`]+"), "PATH"),
    (
        re.compile(
            r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
        ),
        "DATE",
    ),
    (re.compile(r"\b\d{4}-\d{2}\b"), "DATE"),
    (re.compile(r"\b\d{2}:\d{2}(?::\d{2})?\b"), "TIME"),
    (re.compile(r"due since (DATE)"), r"due \1 (WHEN)"),  # explain, of a period now past
    (re.compile(rf"\b(?:in {_DURATION}|{_DURATION} ago)\b"), "WHEN"),
    (re.compile(rf"\b{_DURATION}\b"), "DURATION"),
    (re.compile(r"\d+(?:[.,]\d+)*"), "N"),
    (re.compile(r"([─━═┄])\1+"), r"\1"),
    (re.compile(r" {2,}"), " "),
]


def normal(line: str) -> str:
    for pattern, replacement in _NORMAL:
        line = pattern.sub(replacement, line)
    return line.rstrip()


def flow(lines: list[str]) -> str:
    """The lines as one run of words: where a line wraps depends on the width of the numbers,
    dates and paths in it, which differ from day to day."""
    text = " ".join(normal(line).strip() for line in lines if line.strip())
    return re.sub(r"\s*·\s*", " ", text)  # pairs lose their separator where they wrap


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` is ``expected``, word for word once normalised, with ``…`` (a line of its
    own, or in a line) standing for any text."""
    words = flow(["…" if e.strip() == "…" else e for e in expected]).split("…")
    pattern = r"\s*.*?\s*".join(re.escape(w.strip()) for w in words)
    return re.fullmatch(pattern, flow(actual)) is not None


def first_wrong(expected: list[str], actual: list[str]) -> str:
    """The first line of ``expected`` that the output does not go on to match."""
    for n in range(1, len(expected) + 1):
        if not matches([*expected[:n], "…"], actual):
            return f"line {n} of the output shown: {expected[n - 1]!r}"
    return "the output goes on past what the page shows"


def argv(block: Block, command: str) -> tuple[list[str], bool]:
    """The command as an argument list, and whether its stdout is dropped."""
    assert "|" not in command, f"{block.where}: a pipe cannot run here: mark it not run"
    words = shlex.split(command)
    quiet = words[-2:] == [">", "/dev/null"]
    if quiet:
        words = words[:-2]
    assert not any(w in (">", "<", "&&", ";") for w in words), f"{block.where}: {command}"
    if words[:2] == ["uv", "run"]:
        words = words[2:]
    assert words[0] == "catchup", f"{block.where}: only catchup runs here, not {words[0]}"
    return [sys.executable, "-m", "catchup", *words[1:]], quiet


def run_step(block: Block, step: Step, cwd: Path, env: dict[str, str]) -> list[str]:
    args, quiet = argv(block, step.command)
    done = subprocess.run(
        args,
        cwd=cwd,
        env=env,
        text=True,
        stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
        stderr=subprocess.PIPE if quiet else subprocess.STDOUT,
        timeout=300,
    )
    out = done.stderr if quiet else done.stdout
    # the pages were recorded on a host called vm: where a host's name is printed, this one's
    # reads as that one's
    return out.replace(socket.gethostname(), "vm").splitlines()


def faketime_library() -> Path:
    """The stateless libfaketime ``.ci/faketime`` builds (CI names its own in
    ``CATCHUP_FAKETIME_LIB``), built here once when missing, where the server's user can read it."""
    given = os.environ.get("CATCHUP_FAKETIME_LIB")
    if given:
        return Path(given)
    lib = reachable_place(ROOT / ".catchup-test-faketime") / "libfaketime.so.1"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        lib.parent.chmod(0o755)
        subprocess.run(["bash", str(ROOT / ".ci" / "faketime"), str(lib)], check=True, timeout=300)
    return lib


def real_time() -> float:
    """The real clock's time: under a moved-clock leg this process's clock is
    ``CATCHUP_TEST_CLOCK_AHEAD`` days ahead of it, and libfaketime's offsets count from it."""
    return time.time() - float(os.environ.get("CATCHUP_TEST_CLOCK_AHEAD") or 0) * 86400


@dataclass(frozen=True)
class Pinned:
    env: dict[str, str] = field(repr=False)  # for every command an example runs
    home: Path


def pinned_env(home: Path) -> dict[str, str]:
    """The environment of a command on the pinned clock, with the embedded server in ``home``
    (nothing of the suite's own database, DSN or moved clock)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k == "CATCHUP_PG_BIN" or not k.startswith(("CATCHUP_", "PG", "FAKETIME"))
    }
    env.pop("DATABASE_URL", None)
    offset = round(PINNED.timestamp() - real_time())
    env.update(
        CATCHUP_HOME=str(home),
        LD_PRELOAD=str(faketime_library()),
        FAKETIME=f"{offset:+d}",
        FAKETIME_DONT_FAKE_MONOTONIC="1",  # catchup's local timers stay real
        COLUMNS="80",
        LINES="50",
        NO_COLOR="1",
        TERM="dumb",
    )
    env.pop("FORCE_COLOR", None)
    return env


def embedded(env: dict[str, str], call: str) -> None:
    """``catchup.postgres.embedded.CALL()`` in a process of its own, on the pinned clock."""
    code = f"from catchup.postgres import embedded; embedded.{call}()"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=120)


@pytest.fixture(scope="module")
def pinned() -> Iterator[Pinned]:
    """An embedded server of the examples' own, started on the pinned clock (stopped after)."""
    with own_home() as home:
        env = pinned_env(home)
        embedded(env, "ensure_running")
        try:
            yield Pinned(env, home)
        finally:
            embedded(env, "stop")


def test_the_examples_run_on_the_pinned_clock(pinned: Pinned, tmp_path: Path) -> None:
    """A command of an example and the server it uses both read the pinned moment (a few
    minutes on), not the day the suite runs: otherwise the pages would hold only near it."""
    probe = (
        "import time, psycopg; from catchup.postgres import embedded;"
        " s = embedded.ensure_running();"
        "c = psycopg.connect(s.conninfo);"
        "print(time.time(), c.execute('SELECT extract(epoch FROM clock_timestamp())')"
        ".fetchone()[0])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env=pinned.env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    host, server = (float(word) for word in done.stdout.split())
    for clock in (host, server):
        assert 0 <= clock - PINNED.timestamp() < 3600, datetime.fromtimestamp(clock, UTC)


def scenarios() -> list[tuple[Path, str]]:
    found: list[tuple[Path, str]] = []
    for page in PAGES:
        if page in GENERATED:
            continue
        for block in blocks(page):
            if block.scenario is not None and (page, block.scenario) not in found:
                found.append((page, block.scenario))
    return found


def test_every_console_block_runs_here_or_says_why_not() -> None:
    marked = [b for page in PAGES if page not in GENERATED for b in blocks(page)]
    assert marked, "no console block found"
    assert len([b for b in marked if b.scenario is not None]) >= 10
    for block in marked:
        if block.scenario is not None:
            assert steps(block), f"{block.where}: an example with no command"
            assert block.scenario in SCENARIOS, f"{block.where}: {block.scenario}"


def test_the_comparison_sees_a_changed_word_and_forgives_a_changed_day() -> None:
    shown = ["billing 2026-11-29 attempt 1: succeeded in 0.0s", "…", "3 period(s) would run"]
    assert matches(
        shown, ["billing 2031-02-01 attempt 1: succeeded in 12.5s", "3 period(s) would run"]
    )
    assert matches(
        shown,
        ["billing 2031-02-01 attempt 1: succeeded in 1m3s", "x", "y", "7 period(s) would run"],
    )
    assert not matches(
        shown, ["billing 2031-02-01 attempt 1: failed in 0.0s", "3 period(s) would run"]
    )
    assert not matches(shown, ["billing 2031-02-01 attempt 1: succeeded in 0.0s"])
    # a DST note of another year reads the same; one of the other change (the next one is
    # another kind: a page recorded before it, run after it) does not
    dst = ["i time zones: payroll: 02:30 on 2027-03-28 does not exist in Europe/Berlin (clocks"]
    assert matches(
        dst,
        ["i time zones: payroll: 02:30 on 2031-03-30 does not exist in Europe/Berlin", "(clocks"],
    )
    assert not matches(
        dst, ["i time zones: payroll: 02:30 on 2027-10-31 happens twice in Europe/Berlin (clocks"]
    )


@pytest.mark.parametrize(
    ("page", "scenario"),
    scenarios(),
    ids=[f"{p.relative_to(ROOT)}:{s}" for p, s in scenarios()],
)
def test_the_example_prints_what_the_page_shows(
    page: Path, scenario: str, pinned: Pinned, tmp_path: Path
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    if scenario == "examples":
        shutil.copytree(ROOT / "examples", folder / "examples")
    elif scenario == "here":
        shutil.copytree(ROOT / "examples", folder, dirs_exist_ok=True)
    env = pinned.env
    update = os.environ.get("CATCHUP_UPDATE_DOCS") == "1"
    wrong: list[str] = []
    written: dict[int, list[str]] = {}
    for block in blocks(page):
        if block.scenario != scenario:
            continue
        if scenario == "above":
            assert block.config, f"{block.where}: no TOML block above it"
            (folder / "catchup.toml").write_text(block.config)
        lines: list[str] = []
        before = len(wrong)
        for step in steps(block):
            actual = run_step(block, step, folder, env)
            lines += [f"$ {step.command}", *actual]
            if not matches(step.expected, actual):
                wrong.append(
                    f"{block.where}: $ {step.command}\n{first_wrong(step.expected, actual)}"
                    "\n--- the page shows\n"
                    + "\n".join(step.expected)
                    + "\n--- it prints\n"
                    + "\n".join(actual)
                )
        if len(wrong) > before:  # only what is wrong is written anew: a page's elisions stay
            written[block.line] = lines
    if update and wrong:
        text = page.read_text().splitlines()
        for block in sorted(blocks(page), key=lambda b: -b.line):
            if block.line in written:
                pad = " " * block.indent
                text[block.line : block.end - 1] = [
                    pad + t if t else t for t in written[block.line]
                ]
        page.write_text("\n".join(text) + "\n")
    assert not wrong, "\n\n".join(wrong)
