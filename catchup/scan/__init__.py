"""The gap detector and every state it derives: each job's expected periods (a window in
the job's own zone) against the ledger, collapsed into ranges; a keyed job's periods key by key;
``blocked`` (waiting for upstream), ``outdated``, ``unverified``/``untracked`` (evidence),
``suspect``; the coverage kept for the next scan; the calendar heat map."""
