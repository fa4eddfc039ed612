"""``catchup serve``: the watcher that scans on a thread of its own and keeps the newest
view, the bounded HTTP server that serves it, and what the pages read beside each scan."""
