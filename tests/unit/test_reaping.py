"""The suite's own guard: every test reaps the processes it starts (fix_processes.reap_children)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fix_processes import process_gone, wait_for

pytest_plugins = ["pytester"]

LEAKY = """
import subprocess
from pathlib import Path

def test_leaves_a_child(tmp_path):
    proc = subprocess.Popen(["sleep", "60"])
    Path({pidfile!r}).write_text(str(proc.pid))
    assert {passes}
"""


@pytest.mark.parametrize("passes", [True, False])
def test_a_child_left_running_is_killed_and_fails_a_passing_test(
    pytester: pytest.Pytester, passes: bool
) -> None:
    """The inner test starts `sleep 60` and returns: the child is killed at teardown, and a
    test that had passed is reported as an error naming it (a failing one just fails)."""
    tests = Path(__file__).parent.parent
    for helper in ("fix_processes.py", "paths.py"):  # the plugin under test, as the suite uses it
        (pytester.path / helper).write_text((tests / helper).read_text())
    pytester.makeconftest('pytest_plugins = ["fix_processes"]\n')
    pidfile = pytester.path / "pid"
    pytester.makepyfile(
        test_leaky=textwrap.dedent(LEAKY.format(pidfile=str(pidfile), passes=passes))
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    if passes:
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines(["*left 1 child process(es) running*sleep*"])
    else:
        result.assert_outcomes(failed=1)
    pid = int(pidfile.read_text())
    wait_for(lambda: process_gone(pid), timeout=10, what="the leaked child to be gone")
