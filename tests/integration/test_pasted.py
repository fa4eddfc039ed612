"""Every command printed for a person to paste is shell-safe: a key read from a customers'
table (a space, `;`, `$( )`, a backtick, both quotes) or a job's name with letters the shell
quotes comes back as one argument, in `why`, `why --json`, the period page and its JSON, the
job page's gap commands; the deploy recipes' `kubectl create` lines take only Kubernetes names,
and a `--grace` that would be written `0s` is refused."""

from __future__ import annotations

import html
import json
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fix_processes import wait_for
from fix_project import Project, job_toml
from test_serve import _answers, free_port, get

EVIL = "ev il;$(touch pwned)`touch pwned2`'\"x"
ODD_JOB = "größe.v2"  # a job name the shell needs quoted (letters beyond ASCII)
# `catchup` as a pasted line reaches it: each argument, as the shell split them
ECHO_ARGV = 'catchup() { "$PYTHON" -c \'import json, sys; print(json.dumps(sys.argv[1:]))\' "$@"; }'


def pasted(line: str, cwd: Path) -> list[str]:
    """The arguments `catchup` gets when ``line`` is pasted into a shell (run by sh, with
    `catchup` standing in), and that the shell ran nothing else."""
    done = subprocess.run(
        ["sh", "-c", f"{ECHO_ARGV}\n{line}"],
        cwd=cwd,
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0 and done.stderr == "", (line, done.stderr)
    assert not (cwd / "pwned").exists() and not (cwd / "pwned2").exists(), line
    argv: list[str] = json.loads(done.stdout)
    return argv


def one_argument(line: str, cwd: Path, value: str, after: str) -> None:
    """``value`` is one argument of ``line`` right after ``after``, split by shlex and by sh."""
    assert line.startswith("catchup "), line
    for argv in (shlex.split(line)[1:], pasted(line, cwd)):
        assert after in argv, (line, argv)
        assert argv[argv.index(after) + 1] == value, (line, argv)


@pytest.fixture
def keyed(project: Project, tmp_path: Path) -> Path:
    """A keyed job with the hostile key (its 2026-10-01 run, 2026-10-03 runs a minute when
    run), and a job with an odd name; an empty folder to paste in."""
    script = '[ "$1" = 2026-10-03 ] && exec sleep 60; exit 0'
    project.write(
        job_toml("invoice", keys=[EVIL, "acme"], command=["sh", "-c", script, "sh", "{period}"])
        + job_toml(f'"{ODD_JOB}"', command=["true"])
    )
    ran = project.cli("-q", "run", "invoice", "--period", "2026-10-01", "--key", EVIL)
    assert ran.exit_code == 0, ran.output
    folder = tmp_path / "paste"
    folder.mkdir()
    return folder


def test_why_and_its_json_quote_a_hostile_key(project: Project, keyed: Path) -> None:
    """`why` printed `--key ev il;$(touch pwned)…`: pasted, the shell ran `touch pwned`."""
    lines: list[str] = []
    for day in ("2026-10-01", "2026-10-02"):  # succeeded (reset), missing (run)
        text = project.cli("-q", "why", "invoice", day, "--key", EVIL)
        assert text.exit_code == 0, text.output
        shown = text.stdout.split("to move it:\n", 1)[1].splitlines()
        said = json.loads(project.cli("-q", "why", "invoice", day, "--key", EVIL, "--json").stdout)
        assert [s.strip() for s in shown] == said["commands"] and said["commands"]
        lines += said["commands"]
    assert any(" reset " in c for c in lines) and any(" run " in c for c in lines)
    for line in lines:
        one_argument(line, keyed, EVIL, "--key")
        one_argument(line, keyed, "invoice", "reset" if " reset " in line else "run")
    odd = json.loads(project.cli("-q", "why", ODD_JOB, "2026-10-01", "--json").stdout)
    (run_it,) = odd["commands"]
    one_argument(run_it, keyed, ODD_JOB, "run")


@pytest.fixture
def served(project: Project, keyed: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """serve on it, and the hostile key's 2026-10-03 running."""
    runner = project.spawn("-q", "run", "invoice", "--period", "2026-10-03", "--key", EVIL)
    port = free_port()
    server = project.spawn("serve", "--listen", f"127.0.0.1:{port}", "--refresh", "1s")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(base), timeout=60, what="serve to answer")
        yield base, runner
    finally:
        for proc in (server, runner):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def commands(page: str) -> list[str]:
    """The commands a page shows, as a person copies them."""
    found = re.findall(r"<code><bdi>(.*?)</bdi></code>", page, flags=re.S)
    return [html.unescape(c) for c in found if html.unescape(c).startswith("catchup ")]


def test_the_pages_quote_a_hostile_key(
    served: tuple[str, subprocess.Popen[str]], keyed: Path
) -> None:
    base, _ = served

    def at(day: str, api: bool = False) -> str:
        return f"{base}/{'api/' if api else ''}jobs/invoice/{day}?key={quote(EVIL, safe='')}"

    def running() -> Any:
        status, _, page = get(at("2026-10-03"))
        return status == 200 and "catchup cancel" in page and page

    page = wait_for(running, timeout=60, what="the running period's page")
    cancel = [c for c in commands(page) if c.startswith("catchup cancel")]
    assert cancel, page
    status, _, done = get(at("2026-10-01"))
    assert status == 200
    reset = commands(done)
    assert any(" reset " in c for c in reset), done
    status, _, body = get(at("2026-10-01", api=True))
    assert status == 200
    said = json.loads(body)["why"]["commands"]
    assert said == reset
    for line in cancel + reset:
        one_argument(line, keyed, EVIL, "--key")
    # the job page: each gap range's command, the keys named (at most three)
    status, _, job_page = get(f"{base}/jobs/invoice")
    assert status == 200
    gaps = [c for c in commands(job_page) if "--key" in c]
    named: set[str] = set()
    for line in gaps:
        argv = shlex.split(line)
        assert argv[1] == "replay" and pasted(line, keyed) == argv[1:], line
        named |= {argv[i + 1] for i, word in enumerate(argv) if word == "--key"}
    assert named == {EVIL, "acme"}, gaps


def deploy(*args: str) -> Any:
    from click.testing import CliRunner

    from catchup.cli import cli

    return CliRunner().invoke(cli, ["deploy", *args], catch_exceptions=False)


def refused(result: Any) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return str(lines[0])


@pytest.mark.parametrize("option", ["--secret", "--config-map"])
@pytest.mark.parametrize(
    "value",
    [
        "db; kubectl delete ns prod",
        "db\napiVersion: v1",  # out of the YAML comment, a document of its own
        "$(touch pwned)",
        "Catchup-DB",
        "-db",
        "db.",
        "a" * 254,
    ],
)
def test_a_secret_or_config_map_that_is_no_kubernetes_name_is_refused(
    option: str, value: str
) -> None:
    for recipe in ((), ("--scheduler",)):
        line = refused(deploy("kubernetes", "--image", "app:1", option, value, *recipe))
        assert line.startswith(f"catchup: {option} ") and "Kubernetes name" in line, line


def test_the_kubectl_lines_take_names_as_one_argument_each() -> None:
    for recipe in ((), ("--scheduler",)):
        result = deploy(
            "kubernetes", "--image", "app:1", "--secret", "db.ledger-1", "--config-map",
            "cfg." + "a" * 240, "--namespace", "ops", *recipe,
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        lines = [ln[4:] for ln in result.stdout.splitlines() if ln.startswith("#   kubectl ")]
        secret, config = (shlex.split(line) for line in lines)
        assert secret[:5] == ["kubectl", "create", "secret", "generic", "db.ledger-1"]
        assert config[:4] == ["kubectl", "create", "configmap", "cfg." + "a" * 240]
        assert secret[5:7] == config[4:6] == ["--namespace", "ops"]


@pytest.mark.parametrize("kind", ["kubernetes", "systemd"])
def test_a_grace_under_a_second_is_refused(kind: str) -> None:
    """--grace 400ms was written `--grace 0s`, which `catchup scheduler` refuses: a pod or a
    unit that never starts."""
    image = ("--image", "app:1") if kind == "kubernetes" else ()
    line = refused(deploy(kind, *image, "--scheduler", "--grace", "400ms"))
    assert "--grace" in line and "400ms" in line
    kept = deploy(kind, *image, "--scheduler", "--grace", "1s")
    assert kept.exit_code == 0 and "--grace" in kept.stdout and "1s" in kept.stdout
    assert "0s" not in re.findall(r"--grace\W+(\w+)", kept.stdout)


def test_a_refusals_commands_quote_an_odd_job_name(project: Project) -> None:
    """An exhausted period's refusal names the replay and the reset that run it again: each
    gives the job's name back as one argument."""
    project.write(job_toml(f'"{ODD_JOB}"', command=["false"], max_attempts=1))
    assert project.cli("-q", "run", ODD_JOB, "--period", "2026-10-01").exit_code == 1
    again = project.cli("run", ODD_JOB, "--period", "2026-10-01", "--json")
    said = json.loads(again.stdout)
    lines = re.findall(r"`(catchup [^`]*)`", json.dumps(said, ensure_ascii=False))
    assert [shlex.split(line)[1] for line in lines] == ["replay", "reset"], said
    replay, reset = (shlex.split(line) for line in lines)
    assert replay[replay.index("--job") + 1] == ODD_JOB and reset[2] == ODD_JOB
