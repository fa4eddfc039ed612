"""A page rendered again (the site changed: a reload, a notice) while a scan publishes a newer
view never puts the older view back: the page would say what the scan before said (no leader,
beside the leader itself) until the next refresh."""

from __future__ import annotations

import threading
from dataclasses import replace

from catchup.results import ScanReport
from catchup.serve.watcher import View, Watcher


def never() -> ScanReport:
    raise AssertionError("the watcher's thread is not started here")


def test_a_page_rendered_again_never_replaces_a_newer_scan() -> None:
    watcher = Watcher(
        never,
        lambda: None,
        scrub=lambda text: text,
        refresh=3600,
        title="t",
    )
    rendering, newer_published = threading.Event(), threading.Event()
    page = watcher._page

    def slow_page(view: View) -> bytes:
        if threading.current_thread().name == "republish":
            rendering.set()
            assert newer_published.wait(10)
        return page(view)

    watcher._page = slow_page  # type: ignore[method-assign]
    older = watcher.view
    again = threading.Thread(target=watcher.republish, name="republish")
    again.start()
    assert rendering.wait(10)
    newer = replace(older, took=1.5)
    watcher._publish(newer)  # a scan's, while the older view is rendered again
    served = watcher.view
    newer_published.set()
    again.join(10)
    assert not again.is_alive()
    assert watcher.view is served and watcher.view.took == 1.5
