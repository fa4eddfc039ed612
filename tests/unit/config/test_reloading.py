"""The config watcher a long-running process reloads through (catchup/config/reloading.py): a file
caught between its truncation and its new content is not loaded (an empty config)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from catchup.config.loading import load_config
from catchup.config.reloading import SETTLE, ConfigWatch

TWO = """[jobs.bill]
schedule = "daily"
start = "2026-10-01"
command = ["true"]

[jobs.export]
schedule = "daily"
start = "2026-10-01"
command = ["true"]
"""


def test_a_file_caught_mid_write_is_read_once_it_settles(tmp_path: Path) -> None:
    path = tmp_path / "catchup.toml"
    path.write_text(TWO.split("\n\n")[0] + "\n")
    watch = ConfigWatch(load_config(path, schema="catchup"), schema="catchup")
    path.write_text("")  # truncated: its new content comes a moment later
    writer = threading.Timer(SETTLE / 4, path.write_text, [TWO])
    writer.start()
    try:
        state, said = watch.load()
    finally:
        writer.join()
    assert said == "" and list(state.config.jobs) == ["bill"]  # not 0 jobs
    assert watch.pending()  # read at the next look
    time.sleep(SETTLE / 2)
    state, said = watch.load()
    assert said == "config reloaded: 2 jobs (added export)", said
    assert not watch.pending()
