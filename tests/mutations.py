"""Mutation checks: remove one safeguard at a time from a copy of the package and its SQL, run
the tests that guard it, and fail unless one of them fails.

    uv run python tests/mutations.py            # every mutation, a table at the end
    uv run python tests/mutations.py --list     # the mutations and their tests
    uv run python tests/mutations.py NAME …     # only these
    uv run python tests/mutations.py --jobs 2   # two at a time (what CI does)

A test that still passes with its safeguard gone proves nothing about it; this script is how
the reliability table earns its claims (docs/explanation/reliability.md). The copy goes first on
PYTHONPATH, so the tests and every ``python -m catchup`` they start use it; the SQL is read from
the copy's ``sql/``. ``.ci/run`` runs it, and a surviving mutation fails CI.
"""

from __future__ import annotations

import argparse
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Mutation:
    name: str
    invariant: str
    path: str  # relative to the project
    old: str  # must occur exactly once
    new: str
    tests: tuple[str, ...]
    # more edits, for a safeguard made of two parts (each must occur once): (old, new) in the
    # same file, or (path, old, new) in another
    also: tuple[tuple[str, str] | tuple[str, str, str], ...] = ()

    def edits(self) -> list[tuple[str, str, str]]:
        """Every edit as (path, old, new), the first one first."""
        return [(self.path, self.old, self.new)] + [
            (self.path, *edit) if len(edit) == 2 else edit for edit in self.also
        ]


MUTATIONS = (
    Mutation(
        "every-scan-updates-every-key",
        "a later scan of a keyed job's keys that did not change writes no key row",
        "catchup/scan/verified.py",
        "        if presumed or canonical(*after) != canonical(before, valid and row.follows):\n",
        "        if True:\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_later_scan_reads_only_the_keys_with_something_to_find",
        ),
    ),
    Mutation(
        "a-scan-of-some-keys-moves-the-horizon",
        "the job's horizon moves only with a scan of every key of the job",
        "catchup/scan/keyed.py",
        "    moves = record and all_keys  # only a scan of every key may move the job's horizon\n",
        "    moves = record\n",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_scan_of_one_key_leaves_the_jobs_horizon_where_it_was",
        ),
    ),
    Mutation(
        "a-key-back-keeps-its-absence-verified-unrecorded",
        "a key back after being gone, read without being recorded (a dry run), is looked at "
        "again for the periods it was away",
        "catchup/scan/keyed.py",
        "            verified = None if expected < row.expected_from else back(row)\n",
        "            verified = None if expected < row.expected_from else row.verified\n",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_key_back_is_looked_at_for_its_days_away_by_a_dry_run_too",
        ),
    ),
    Mutation(
        "a-stale-scan-records-a-key",
        "a scan records nothing of a key that came back, went or moved since it read it",
        "sql/queries/keys.sql",
        "  AND k.expected_from = v.since AND k.gone_at IS NOT DISTINCT FROM v.gone;\n",
        ";\n",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_scan_records_nothing_of_a_key_that_came_back_since_it_read_it",
        ),
    ),
    Mutation(
        "every-read-updates-every-key",
        "a read of a keyed job's keys writes only the key rows it changes",
        "sql/queries/keys.sql",
        "    WHERE e.key IS NULL OR e.gone_at IS NOT NULL OR s.since <> e.expected_from\n",
        "",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_later_scan_or_tick_of_keys_that_did_not_change_writes_no_key_row",
            "tests/integration/test_key_writes.py::"
            "test_a_later_read_of_a_keys_list_writes_no_key_row",
        ),
    ),
    Mutation(
        "a-key-back-keeps-its-absence-verified",
        "a key back after being gone is looked at again for the periods it was away",
        "sql/queries/keys.sql",
        "                        WHEN k.gone_at IS NOT NULL AND upper_inf(k.verified)\n",
        "                        WHEN false\n",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_key_back_after_being_gone_is_looked_at_for_the_days_it_was_away",
        ),
    ),
    Mutation(
        "an-excluded-period-is-claimed",
        "a period nobody expects (its job's exclude, a window recorded afterwards) is never "
        "claimed",
        "catchup/claims/path.py",
        "        by = None if rules.include_excluded else "
        "excluded_now(session, job, job_id, period)\n",
        "        by = None\n",
        (
            "tests/integration/test_exclusions.py::"
            "test_a_job_whose_latest_period_is_excluded_runs_nothing",
        ),
    ),
    Mutation(
        "ping-finish-planted-elsewhere",
        "a finish whose start was taken over is kept against its start's period, never another",
        "catchup/pings/ingest.py",
        "        if ping.rid and (began := session.ledger.ping_started(job_id, job.key, owner)):\n",
        "        if False and (began := session.ledger.ping_started(job_id, job.key, owner)):\n",
        (
            "tests/integration/test_pings.py::"
            "test_a_finish_whose_start_was_taken_over_is_kept_never_planted_elsewhere",
        ),
    ),
    Mutation(
        "ping-finishes-another-owners-attempt",
        "a ping finishes only an attempt a start ping claimed, never a runner's",
        "sql/queries/pings.sql",
        "  AND r.owner = %(owner)s\n",
        "  AND (r.owner = %(owner)s OR (%(owner)s = 'ping' AND r.owner LIKE 'ping%%'))\n",
        (
            "tests/integration/test_pings.py::"
            "test_a_ping_never_finishes_an_attempt_a_host_named_ping_holds",
        ),
    ),
    Mutation(
        "bysetpos-counted-from-start",
        "BYSETPOS counts over the whole week, month or year, wherever start falls in it",
        "catchup/schedule/rrule.py",
        "dtstart=interval_start(parts, start)",
        "dtstart=start",
        (
            "tests/unit/schedule/test_rfc5545.py::"
            "test_bysetpos_counts_the_whole_week_when_start_falls_inside_it",
            "tests/unit/schedule/test_rfc5545.py::"
            "test_bysetpos_counts_the_week_from_wkst_when_start_is_a_tuesday",
        ),
    ),
    Mutation(
        "phantom-week-53",
        "BYWEEKNO keeps only the days of the weeks it names (dateutil finds a 53rd in some years)",
        "catchup/schedule/rrule.py",
        "        if self.weeks.isdisjoint(week_number(w.date(), self.wkst)):\n"
        "            return False\n",
        "",
        ("tests/unit/schedule/test_rfc5545.py::test_by_week_number_keeps_only_the_weeks_named",),
    ),
    Mutation(
        "implied-parts-from-dateutil",
        "the parts RFC 5545 takes from DTSTART come from start as libical takes them",
        "catchup/schedule/rrule.py",
        "        full = implied(parts, start)\n",
        "        full = dict(parts)\n",
        (
            "tests/unit/schedule/test_rfc5545.py::"
            "test_yearly_by_week_number_takes_the_weekday_from_the_start",
            "tests/unit/schedule/test_rfc5545.py::"
            "test_yearly_by_month_day_takes_the_month_from_the_start",
        ),
    ),
    Mutation(
        "slow-batches-keep-their-size",
        "a compaction batch that held its rows too long makes the next one smaller",
        "catchup/maintenance/retention.py",
        "        return max(BATCH_MIN, limit // 2)",
        "        return limit",
        (
            "tests/unit/maintenance/test_retention.py::test_a_slow_batch_halves_the_next_down_to_the_floor",
        ),
    ),
    Mutation(
        "compaction-deletes-the-fact",
        "compaction keeps a settled period's row: it never looks missing, never runs again",
        "sql/queries/compaction.sql",
        "    LEFT JOIN firsts f ON f.key = m.key AND f.period_start = m.period_start\n"
        "    ORDER BY m.key, m.period_start\n",
        "    LEFT JOIN firsts f ON f.key = m.key AND f.period_start = m.period_start\n"
        "    WHERE false\n    ORDER BY m.key, m.period_start\n",
        (
            "tests/integration/test_compaction.py::"
            "test_compaction_keeps_each_periods_fact_and_drops_its_detail",
            "tests/integration/test_compaction.py::"
            "test_compaction_never_changes_the_scan_nor_makes_a_period_claimable",
        ),
    ),
    Mutation(
        "compacted-periods-claimable",
        "only a settled period is compacted: a compacted one is never claimable again",
        "sql/queries/compaction.sql",
        "    WHERE r.status IN ('succeeded', 'waived')\n"
        "      AND (r.compacted_at IS NULL OR r.status = 'succeeded')\n",
        "    WHERE (r.compacted_at IS NULL OR r.status = 'succeeded')\n",
        (
            "tests/integration/test_compaction.py::"
            "test_compaction_never_changes_the_scan_nor_makes_a_period_claimable",
        ),
    ),
    Mutation(
        "compacted-fact-not-checked",
        "a period moved to compacted is refused by every claim: the row written into runs skips it",
        "sql/migrations/0020_compacted.sql",
        "    IF EXISTS (SELECT 1 FROM {schema}.compacted c\n"
        "               WHERE c.job_id = NEW.job_id AND c.key = NEW.key\n",
        "    IF false AND EXISTS (SELECT 1 FROM {schema}.compacted c\n"
        "               WHERE c.job_id = NEW.job_id AND c.key = NEW.key\n",
        (
            "tests/integration/test_compaction.py::"
            "test_compaction_never_changes_the_scan_nor_makes_a_period_claimable",
        ),
    ),
    Mutation(
        "claim-passes-a-batch-mid-move",
        "a claim waits for a compaction batch that is moving its period, then meets the fact",
        "sql/migrations/0020_compacted.sql",
        "    PERFORM pg_advisory_xact_lock_shared("
        "hashtext('catchup compacted ' || TG_TABLE_SCHEMA),\n"
        "                                         NEW.job_id::integer);\n",
        "",
        (
            "tests/faults/test_compaction_faults.py::"
            "test_a_claim_meeting_a_batch_mid_move_is_refused_after_it",
        ),
    ),
    Mutation(
        "compacted-upstream-not-done",
        "a compacted upstream period is done: the downstream period after it is claimed",
        "sql/queries/claims.sql",
        "WHERE c.done IS NULL AND (r.status IS NULL OR r.status NOT IN ('succeeded', 'waived'))",
        "WHERE (r.status IS NULL OR r.status NOT IN ('succeeded', 'waived'))",
        (
            "tests/integration/test_compacted.py::"
            "test_a_downstream_job_runs_after_its_compacted_upstream",
        ),
    ),
    Mutation(
        "compaction-cursor-skips",
        "the compaction cursor moves to the last run a batch looked at, not past the rest",
        "sql/queries/compaction.sql",
        "           CASE WHEN l.n < %(limit)s THEN %(before)s ELSE l.last_at END,",
        "           %(before)s,",
        (
            "tests/integration/test_compaction.py::"
            "test_compaction_never_changes_the_scan_nor_makes_a_period_claimable",
        ),
    ),
    Mutation(
        "reset-of-compacted",
        "a reset makes a compacted period an ordinary one again (and runnable)",
        "sql/queries/changes.sql",
        ", compacted_at = NULL\n",
        "\n",
        (
            "tests/integration/test_compaction.py::"
            "test_a_reset_after_compaction_runs_the_period_again",
        ),
    ),
    Mutation(
        "keys-locked-in-order",
        "a read of the keys locks the rows it changes in key order first: two ticks never deadlock",
        "sql/queries/keys.sql",
        "           ELSE k.gone_at IS NOT NULL OR s.since <> k.expected_from END\nORDER BY k.key\n",
        "           ELSE k.gone_at IS NOT NULL OR s.since <> k.expected_from END\n",
        ("tests/integration/test_keys.py::test_recording_keys_locks_their_rows_in_key_order",),
    ),
    Mutation(
        "scan-blocked-by-own-previous-key",
        "a keyed job after its own previous period: a key's missing day blocks its later ones",
        "catchup/scan/keyblocked.py",
        "    for a, b, active in carried(job, lo, hi, pieces) if own else pieces:",
        "    for a, b, active in pieces:",
        (
            "tests/integration/test_keys.py::"
            "test_a_keyed_running_balance_is_blocked_key_by_key_after_its_own_failed_day",
        ),
    ),
    Mutation(
        "scan-outdated-per-key",
        "a keyed upstream's re-run of one key makes that key's downstream periods outdated",
        "catchup/scan/outdated.py",
        '        again = max(latest.get(("", start), ran), latest.get((key, start), ran))',
        '        again = latest.get(("", start), ran)',
        (
            "tests/integration/test_keys.py::test_an_upstream_rerun_makes_the_keys_that_used_it_outdated",
        ),
    ),
    Mutation(
        "keys-read-before-the-ledger-is-made",
        "a config whose every keys query fails makes no database and no schema",
        "catchup/api/base.py",
        "        if self._session is None and not self._keys_checked:\n"
        "            from ..scan.firstread import keys_before_making",
        "        if False:\n            from ..scan.firstread import keys_before_making",
        (
            "tests/integration/test_blast_radius.py::"
            "test_a_config_whose_every_keys_query_fails_makes_no_ledger",
        ),
    ),
    Mutation(
        "run-of-one-key-on-the-keys-read-last",
        "run --key on a failing keys query runs the key from the keys read last, saying so",
        "catchup/api/running.py",
        "        if not (known := ledger.key_history(job_id)):",
        "        if True:",
        (
            "tests/integration/test_blast_radius.py::"
            "test_run_of_one_key_goes_on_with_the_keys_it_read_last",
        ),
    ),
    Mutation(
        "cancelled-read-as-interrupted",
        "a period a person cancelled is cancelled in the scan, jobs and /metrics, not interrupted",
        "sql/migrations/0023_cancelled_state.sql",
        "        WHEN interrupted AND cancelled THEN 'cancelled'",
        "        WHEN false THEN 'cancelled'",
        (
            "tests/integration/test_cancel.py::"
            "test_a_cancelled_period_is_cancelled_in_why_and_a_later_failure_counts_as_the_first",
        ),
    ),
    Mutation(
        "the-leader-waits-for-the-tick",
        "the scheduler never waits on a period: what falls due starts while a long one runs",
        "catchup/scheduler/leading.py",
        "    started.start()\n",
        "    started.start()\n    started.join()\n",
        (
            "tests/faults/test_scheduler_busy.py::test_a_job_added_runs_while_a_long_period_runs",
            "tests/faults/test_scheduler_busy.py::"
            "test_minute_periods_start_while_a_long_period_runs",
        ),
    ),
    Mutation(
        "a-rename-fails-on-a-registration-under-way",
        "a rename racing a scheduler's registration of the new name is asked once more",
        "catchup/ledger/changes.py",
        "        except pg_errors.UniqueViolation:\n",
        "        except pg_errors.DataError:\n",
        (
            "tests/integration/test_rename_hold.py::"
            "test_a_rename_while_a_scheduler_registers_the_new_name_renames",
        ),
    ),
    Mutation(
        "a-lane-takes-every-worker",
        "a lane's jobs run on its own workers only: a slow lane never takes the default lane's",
        "catchup/scheduler/inflight.py",
        "                workers = self._workers if name == DEFAULT_LANE else sizes[name]\n",
        "                workers = self._workers\n",
        ("tests/faults/test_scheduler_busy.py::test_a_lane_never_takes_another_lanes_workers",),
    ),
    Mutation(
        "serve-stops-on-sighup",
        "catchup serve reads its config again on SIGHUP and goes on serving",
        "catchup/cli/admin.py",
        "    with stop_signals(reload=hup) as stop:\n",
        "    with stop_signals() as stop:\n",
        ("tests/integration/test_serve.py::test_sighup_reads_the_config_again_and_serve_goes_on",),
    ),
    Mutation(
        "a-takeover-waits-for-the-next-due-moment",
        "the leader wakes when the lease of a period another process ran runs out",
        "sql/queries/leader.sql",
        "      AND r.lease_expires_at > clock_timestamp() AND r.owner <> %(owner)s\n",
        "      AND false AND r.owner <> %(owner)s\n",
        (
            "tests/faults/test_scheduler.py::"
            "test_a_leader_killed_mid_period_leaves_it_to_its_lease_then_attempt_2_once",
        ),
    ),
    Mutation(
        "waiting-periods-are-never-late",
        "while a scheduler leads, a due period not started yet counts as late as it is",
        "catchup/scheduler/pulse.py",
        "    unstarted = _unstarted(session, rows, by_id, resolved, now) if waiting else []\n",
        "    unstarted: list[datetime] = []\n",
        (
            "tests/integration/test_pulse_leader.py::"
            "test_periods_still_waiting_while_a_scheduler_leads_turn_the_pulse_red",
        ),
    ),
    Mutation(
        "the-page-waits-a-refresh-to-name-its-leader",
        "a scheduler's --serve page scans again the moment its process takes the lead",
        "catchup/scheduler/leading.py",
        "                    self._on_lead()\n",
        "                    pass\n",
        (
            "tests/integration/test_scheduler_reload.py::"
            "test_the_page_names_the_leader_once_its_own_process_leads",
        ),
    ),
    Mutation(
        "retry-moments-do-not-wake-the-leader",
        "the leader wakes when a failed period's backoff ends, not at the next due moment",
        "catchup/api/scheduling.py",
        "            return wake_in(jobs, session.now(), LONGEST_SLEEP, retry)",
        "            return wake_in(jobs, session.now(), LONGEST_SLEEP, None)",
        (
            "tests/faults/test_scheduler_busy.py::"
            "test_a_retry_starts_when_its_backoff_ends_while_a_long_period_runs",
        ),
    ),
    Mutation(
        "a-later-tick-plans-what-another-holds",
        "a tick never plans a period another running tick holds, nor its lane",
        "catchup/scheduler/inflight.py",
        "                if not any(others[m] for m in _marks(item.job, item.period.start))",
        "                if True",
        ("tests/unit/scheduler/test_inflight.py",),
    ),
    Mutation(
        "keys-read-before-writes",
        "a keys query that fails leaves the ledger as it was: its keys are read before any write",
        "catchup/scan/detector.py",
        "        sources = read_each(session, jobs)  # before anything is written; each fails"
        " alone",
        "        sources = ({}, {})",
        ("tests/integration/test_keys.py::test_a_keys_query_that_fails_writes_nothing",),
    ),
    Mutation(
        "replay-plans-keyed-upstream",
        "a replay of one job runs the keyed upstream periods of its own keys that it waits for",
        "catchup/replay/planning.py",
        '                    key = item.job.key if up.keyed else ""',
        '                    key = ""',
        (
            "tests/integration/test_keys.py::"
            "test_a_replay_of_one_job_runs_the_keyed_upstream_periods_it_needs",
        ),
    ),
    Mutation(
        "scan-blocked-by-own-key",
        "a keyed job's period is blocked by the undone period of its own key in a keyed upstream",
        "catchup/scan/keyblocked.py",
        "        own = {name: keys[r.key] for name, keys in by_key.items() if r.key in keys}",
        "        own: dict[str, list[UpstreamRun]] = {}",
        (
            "tests/integration/test_keys.py::"
            "test_a_scan_blocks_each_keys_periods_by_its_own_upstream_key",
        ),
    ),
    Mutation(
        "batch-claim-read-back",
        "a batch claim whose answer was lost is read back and adopted, not claimed again",
        "catchup/claims/reconnecting.py",
        "            if back:\n                return back  # the batch commits whole",
        "            if False:\n                return back  # the batch commits whole",
        ("tests/faults/test_faults.py::test_a_batch_whose_answer_is_lost_runs_every_key_once",),
    ),
    Mutation(
        "batch-finish-read-back",
        "a batch finish whose answer was lost is read back: what it recorded stays recorded",
        "catchup/claims/reconnecting.py",
        "            if row.status != RunStatus.running:\n"
        "                assert row.finished_at is not None\n"
        "                found[i] = Finished(row.finished_at, row.failures, row.retry_after)\n"
        "            else:\n"
        "                left.append(i)",
        "            left.append(i)",
        ("tests/faults/test_faults.py::test_a_batch_whose_answer_is_lost_runs_every_key_once",),
    ),
    Mutation(
        "scan-blocked-keys",
        "a keyed job's missing periods an unkeyed upstream's undone periods hold are blocked",
        "catchup/scan/blocked.py",
        "        return carved_keys(job, result, runs, uppers, by_key or {}, own_dep)",
        "        return result",
        (
            "tests/integration/test_keys.py::"
            "test_a_scan_says_which_keys_periods_an_unkeyed_upstream_blocks",
        ),
    ),
    Mutation(
        "key-holes-probed-per-key",
        "a later scan's index probe for a hole looks at that key's rows only, as the merge does",
        "sql/queries/keys.sql",
        "        WHERE r.job_id = %(job_id)s AND r.key = st.key\n",
        "        WHERE r.job_id = %(job_id)s\n",
        ("tests/integration/test_keys.py::test_a_scan_finds_the_same_holes_by_probe_and_by_merge",),
    ),
    Mutation(
        "key-refused-before-writes",
        "a --key the job lacks is refused before anything is written (nor run, marked or reset)",
        "catchup/api/base.py",
        "        check_selected(self.session, keyed)  # a key the job lacks",
        "        pass  # a key the job lacks",
        (
            "tests/integration/test_keys.py::"
            "test_a_key_the_job_lacks_is_refused_before_anything_is_written",
        ),
    ),
    Mutation(
        "batch-give-back",
        "a caller that fails mid-batch strands nothing: what ran is recorded, the rest given back",
        "catchup/claims/batch.py",
        "        batch.give_back()  # the caller failed",
        "        pass  # the caller failed",
        ("tests/integration/test_batches.py::test_a_caller_that_fails_mid_batch_strands_nothing",),
    ),
    Mutation(
        "batch-goes-on-after-a-timeout",
        "a call that times out in a batch fails alone: the keys claimed after it still run",
        "catchup/claims/batch.py",
        "        while self.waiting and not self.halted():\n",
        "        for _ in range(1 if self.waiting and not self.halted() else 0):\n",
        ("tests/integration/test_batches.py::test_a_call_that_times_out_in_a_batch_fails_alone",),
    ),
    Mutation(
        "key-evidence-per-key",
        "a key's evidence verifies that key's periods only, never another key's",
        "sql/queries/evidence.sql",
        "    WINDOW w AS (PARTITION BY k ORDER BY t, kind ROWS UNBOUNDED PRECEDING)\n",
        "    WINDOW w AS (ORDER BY t, kind ROWS UNBOUNDED PRECEDING)\n",
        (
            "tests/integration/test_key_evidence.py::"
            "test_a_keyed_jobs_evidence_is_checked_key_by_key",
        ),
    ),
    Mutation(
        "key-evidence-before-claim",
        "a key's period whose own evidence exists is never run; another key's evidence does"
        " not count",
        "sql/queries/evidence.sql",
        "    SELECT 1 FROM ({source}) AS s WHERE s.k = %(key)s AND s.v >= %(lo)s",
        "    SELECT 1 FROM ({source}) AS s WHERE s.v >= %(lo)s",
        (
            "tests/integration/test_key_evidence.py::"
            "test_a_replay_never_runs_a_keys_untracked_period",
        ),
    ),
    Mutation(
        "batch-claim-takeover",
        "a batch takes a running period over only when its lease ran out, as one claim does",
        "sql/migrations/0031_batch_attempts_after_history.sql",
        "               AND r.lease_expires_at <= clock_timestamp()\n",
        "",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_claims_each_period_as_its_own_claim_would",
        ),
    ),
    Mutation(
        "claim-attempt-restarts-at-one",
        "a period whose row a person deleted runs again as the attempt after its history's",
        "sql/migrations/0030_attempts_after_history.sql",
        "               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        "               1 + 0 * coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        (
            "tests/integration/test_attempts.py::"
            "test_a_period_whose_row_a_person_deleted_runs_again_as_its_next_attempt",
        ),
    ),
    Mutation(
        "batch-attempt-restarts-at-one",
        "a batch claims a period whose row a person deleted as the attempt after its history's",
        "sql/migrations/0031_batch_attempts_after_history.sql",
        "               1 + coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        "               1 + 0 * coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_claims_each_period_as_its_own_claim_would",
        ),
    ),
    Mutation(
        "mark-attempt-restarts-at-zero",
        "a mark of a period whose row a person deleted keeps its history's attempt number",
        "sql/queries/changes.sql",
        "       coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        "       0 * coalesce((SELECT max(h.attempt) FROM {schema}.history h\n",
        (
            "tests/integration/test_attempts.py::"
            "test_a_period_whose_row_a_person_deleted_runs_again_as_its_next_attempt",
        ),
    ),
    Mutation(
        "batch-key-pause",
        "a batch never claims a paused key's period",
        "sql/migrations/0031_batch_attempts_after_history.sql",
        "        AND (w.k = '' OR NOT EXISTS (\n",
        "        AND (true OR NOT EXISTS (\n",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_claims_each_period_as_its_own_claim_would",
        ),
    ),
    Mutation(
        "batch-overlap-guard",
        "a batch claims a key's period only while no other period of the key runs",
        "sql/migrations/0031_batch_attempts_after_history.sql",
        "            WHERE o.job_id = p_job_id AND o.key = w.k\n",
        "            WHERE o.job_id = p_job_id\n",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_claims_each_period_as_its_own_claim_would",
        ),
        also=(
            (
                "              AND o.period_start <> w.s))\n",
                "              AND (o.period_start <> w.s OR o.key <> w.k)))\n",
            ),
        ),
    ),
    Mutation(
        "batch-one-period-per-key",
        "with overlap forbidden, a batch claims one period of a key, not two at once",
        "sql/migrations/0031_batch_attempts_after_history.sql",
        "                            CASE WHEN p_allow_overlap THEN u.s END)\n",
        "                            u.s)\n",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_claims_one_period_of_a_key_at_a_time_when_overlap_is_forbidden",
        ),
    ),
    Mutation(
        "batch-finish-fence",
        "a batch's finish never records an attempt that was taken over",
        "sql/migrations/0015_batches.sql",
        "          AND r.attempt = g.a AND r.status = 'running'\n",
        "          AND r.status = 'running'\n",
        (
            "tests/integration/test_batches.py::"
            "test_a_batch_finish_is_fenced_per_attempt_and_applied_once",
        ),
    ),
    Mutation(
        "batch-waiting-leases",
        "the periods waiting in a batch are renewed with the one that runs, never taken over",
        "catchup/claims/batch.py",
        "            return self.renew([n, *behind], within).get(n)",
        "            return self.renew([n], within).get(n)",
        (
            "tests/integration/test_batches.py::"
            "test_periods_waiting_in_a_batch_keep_their_leases_while_a_slow_one_runs",
        ),
    ),
    Mutation(
        "alerts-per-state-for-keys",
        "a job with keys is told once per state, with how many keys, not once per span of keys",
        "catchup/reports/alerts.py",
        "    if not _keyed(job):\n        return list(job.gaps)",
        "    if True:\n        return list(job.gaps)",
        (
            "tests/integration/test_alerts.py::"
            "test_a_job_with_keys_is_told_once_per_state_with_how_many_keys",
        ),
    ),
    Mutation(
        "key-verified-forgotten",
        "a row of a key removed by hand is missing again in the next scan (what was verified of"
        " the key is forgotten)",
        "sql/migrations/0020_compacted.sql",
        "    UPDATE {schema}.job_keys k SET verified = NULL\n"
        "    FROM (SELECT DISTINCT job_id, key FROM gone) g\n",
        "    UPDATE {schema}.job_keys k SET verified = verified\n"
        "    FROM (SELECT DISTINCT job_id, key FROM gone) g\n",
        (
            "tests/integration/test_keys.py::"
            "test_what_a_scan_verified_of_each_key_is_kept_and_forgotten_when_a_row_goes",
        ),
    ),
    Mutation(
        "key-verified-stops-at-a-hole",
        "what a scan verifies of a key leaves out its holes, so a later scan still finds them",
        "catchup/scan/verified.py",
        "        for a, b in sorted(holes):",
        "        for a, b in ():",
        (
            "tests/integration/test_keys.py::"
            "test_what_a_scan_verified_of_each_key_is_kept_and_forgotten_when_a_row_goes",
        ),
    ),
    Mutation(
        "keys-written-for-a-job-gone",
        "a read of a job whose row went meanwhile (renamed over) writes no key row",
        "catchup/ledger/keys.py",
        "            if locked is None or (diff.first_read and self.has_keys(job_id)):\n",
        "            if diff.first_read and self.has_keys(job_id):\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_of_a_job_whose_row_went_meanwhile_writes_no_key",
        ),
    ),
    Mutation(
        "key-list-written-for-a-job-gone",
        "a read recorded whole (every key) of a job whose row went meanwhile writes no key row",
        "catchup/ledger/keys.py",
        '            if self.conn.execute(self._q("lock_job_row"), {"job_id": job_id}).fetchone()'
        " is None:\n",
        "            if False:\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_of_a_job_whose_row_went_meanwhile_writes_no_key",
        ),
    ),
    Mutation(
        "keys-failure-page-says-no-gaps",
        'the page of a job whose keys query failed never says "no gaps"',
        "catchup/render/jobpage.py",
        '    elif scan.keys_error:  # what its keys would show is not known: never "no gaps"\n',
        "    elif False:\n",
        (
            "tests/unit/render/test_home_before_a_scan.py::"
            "test_a_keys_query_that_failed_is_said_as_itself_and_never_as_no_gaps",
        ),
    ),
    Mutation(
        "key-pause",
        "a paused key is never claimed, while its job's other keys run",
        "sql/migrations/0030_attempts_after_history.sql",
        "        AND (p_key = '' OR NOT EXISTS (\n",
        "        AND (true OR NOT EXISTS (\n",
        ("tests/integration/test_keys.py::test_one_key_paused_is_left_alone_and_why_says_so",),
    ),
    Mutation(
        "key-in-claim",
        "the same period of two keys is two runs: the key is part of the claim's identity",
        "sql/migrations/0030_attempts_after_history.sql",
        "        SELECT p_job_id, p_key, p_period_start, p_period_end, 'running',\n",
        "        SELECT p_job_id, '', p_period_start, p_period_end, 'running',\n",
        (
            "tests/integration/test_keys.py::test_the_same_period_of_two_keys_is_two_claims",
            "tests/integration/test_keys.py::"
            "test_every_key_runs_its_own_period_and_one_failing_key_re_runs_alone",
        ),
    ),
    Mutation(
        "key-in-fence",
        "a finish is fenced to its own key: it never records another key's running period",
        "sql/migrations/0014_keys.sql",
        "        WHERE job_id = p_job_id AND key = p_key AND period_start = p_period_start\n"
        "          AND attempt = p_attempt AND status = 'running'\n        RETURNING job_id",
        "        WHERE job_id = p_job_id AND period_start = p_period_start\n"
        "          AND attempt = p_attempt AND status = 'running'\n        RETURNING job_id",
        ("tests/integration/test_keys.py::test_a_finish_is_fenced_to_its_own_key",),
    ),
    Mutation(
        "key-in-overlap-guard",
        "overlap is forbidden per key: one key's running period never holds another key back",
        "sql/migrations/0030_attempts_after_history.sql",
        "            WHERE o.job_id = p_job_id AND o.key = p_key\n",
        "            WHERE o.job_id = p_job_id\n",
        ("tests/integration/test_keys.py::test_overlap_is_forbidden_per_key_unless_forbid_job",),
        also=(
            (
                "              AND o.period_start <> p_period_start))\n",
                "              AND (o.period_start <> p_period_start OR o.key <> p_key)))\n",
            ),
        ),
    ),
    Mutation(
        "server-user-made-unlocked",
        "catchup's commands started at once on a fresh machine each get the one server user",
        "catchup/postgres/processes.py",
        "    with _useradd_lock():\n",
        "    with contextlib.nullcontext():\n",
        (
            "tests/integration/test_embedded.py::"
            "test_processes_started_at_once_on_a_fresh_machine_each_get_the_servers_user",
        ),
    ),
    Mutation(
        "binaries-copy-race-lost",
        "catchup's commands started at once from an unreachable virtualenv share one copy of "
        "the binaries",
        "catchup/postgres/embedded.py",
        '        if (usable / "postgres").exists():  # another catchup\'s copy, moved in'
        " first: its\n",
        "        if False:\n",
        (
            "tests/integration/test_hostile_second.py::"
            "test_processes_started_at_once_share_one_copy_of_the_binaries",
        ),
    ),
    Mutation(
        "key-history-first-read",
        "a tenant added later has no gaps before it was first seen",
        "sql/queries/keys.sql",
        "                        CASE WHEN f.yes THEN %(start)s::timestamptz ELSE t.now END)",
        "                        %(start)s::timestamptz)",
        (
            "tests/integration/test_keys.py::"
            "test_a_tenant_added_mid_window_has_no_earlier_gaps_and_a_removed_one_stops",
        ),
    ),
    Mutation(
        "settled-key-with-a-failed-row",
        "a later scan finds the failed periods of the keys it only counted",
        "catchup/ledger/keys.py",
        "        every_row = settled is not None and settled.split",
        "        every_row = False",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_later_scan_reads_only_the_keys_with_something_to_find",
        ),
    ),
    Mutation(
        "settled-paused-key",
        "a later scan counts a paused key as settled: it is not said to be paused",
        "sql/queries/keys.sql",
        "coalesce(p.settling AND k.paused_at IS NULL AND (",
        "coalesce(p.settling AND (",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_later_scan_reads_only_the_keys_with_something_to_find",
        ),
    ),
    Mutation(
        "settled-key-with-old-holes",
        "a later scan counts a key with holes before what was verified of it as settled",
        "sql/queries/keys.sql",
        "             OR k.verified @> tstzrange(p.starts[b.b + 1], p.starts[p.n], '[]')\n",
        "             OR true\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_later_scan_reads_only_the_keys_with_something_to_find",
        ),
    ),
    Mutation(
        "settled-keys-not-expected",
        "a later scan's expected (key, period) pairs leave out the keys it only counted",
        "catchup/scan/keyed.py",
        "    expected = expected_count(keys, starts, ends) + settled.expected(len(periods))",
        "    expected = expected_count(keys, starts, ends)",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_later_scan_reads_only_the_keys_with_something_to_find",
        ),
    ),
    Mutation(
        "keys-diff-odd-unchecked",
        "a later read of a keys query lets a key with a control character (or none) through",
        "catchup/scan/keyed.py",
        "    if diff[0].twice is not None or any(key_problem(key) is not None for key in"
        " diff[0].odd):",
        "    if diff[0].twice is not None:",
        (
            "tests/integration/test_key_reads.py::"
            "test_keys_read_as_what_changed_are_refused_as_every_key_read_is",
        ),
    ),
    Mutation(
        "keys-diff-line-break-unseen",
        "a key with a line break in it is refused, never taken for two keys (one of them gone)",
        "catchup/ledger/keys.py",
        '        if block.count("\\n") + 1 != n:\n',
        "        if False:\n",
        (
            "tests/integration/test_key_reads.py::test_a_first_read_refuses_what_every_read_refuses",
            "tests/integration/test_key_reads.py::"
            "test_keys_read_as_what_changed_are_refused_as_every_key_read_is",
        ),
    ),
    Mutation(
        "keys-diff-block-unlooked-at",
        "a new key that is not plain printable ASCII is judged by key_problem, first read or later",
        "catchup/ledger/keys.py",
        "        elif NOT_PLAIN.search(block) is not None:\n",
        "        elif False:\n",
        ("tests/integration/test_key_reads.py::test_a_first_read_refuses_what_every_read_refuses",),
    ),
    Mutation(
        "keys-diff-twice-unchecked",
        "a later read of a keys query lets a key returned twice through",
        "catchup/scan/keyed.py",
        "    if diff[0].twice is not None or any(key_problem(key) is not None for key in"
        " diff[0].odd):",
        "    if any(key_problem(key) is not None for key in diff[0].odd):",
        (
            "tests/integration/test_key_reads.py::"
            "test_keys_read_as_what_changed_are_refused_as_every_key_read_is",
        ),
    ),
    Mutation(
        "keys-diff-every-key-changed",
        "a later read of a keys query writes (locks) keys that did not change",
        "sql/queries/keys.sql",
        "ELSE h.key IS NULL OR h.gone_at IS NOT NULL OR g.since <> h.expected_from END\n",
        "ELSE true END\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_keys_read_as_what_changed_record_what_changed",
        ),
    ),
    Mutation(
        "keys-digest-counts-only",
        "a later read takes keys as unchanged when as many are returned as are held",
        "sql/queries/keys.sql",
        '      coalesce(sum(hashtextextended(k.key COLLATE "C", %(seed_a)s)), 0),\n'
        '      coalesce(sum(hashtextextended(k.key COLLATE "C", %(seed_b)s)\n',
        '      0,\n      0 * coalesce(sum(hashtextextended(k.key COLLATE "C", %(seed_b)s)\n',
        (
            "tests/integration/test_key_reads.py::"
            "test_keys_compared_whole_find_each_change[swapped]",
        ),
    ),
    Mutation(
        "keys-digest-ignores-dates",
        "a later read misses a key now expected from another date",
        "sql/queries/keys.sql",
        "                   # CASE WHEN %(dated)s THEN timestamp_hash_extended(\n",
        "                   # CASE WHEN false THEN timestamp_hash_extended(\n",
        ("tests/integration/test_key_reads.py::test_keys_compared_whole_find_each_change[moved]",),
    ),
    Mutation(
        "keys-digest-counts-gone-keys",
        "a later read misses a key back after being gone",
        "sql/queries/keys.sql",
        "                    WHERE k.job_id = %(job_id)s AND k.gone_at IS NULL)\n",
        "                    WHERE k.job_id = %(job_id)s)\n",
        ("tests/integration/test_key_reads.py::test_keys_compared_whole_find_each_change[back]",),
    ),
    Mutation(
        "key-blocks-unordered",
        "a read recorded a block at a time locks its key rows in key order across blocks",
        "sql/queries/keys.sql",
        '(ORDER BY coalesce(g.key, h.key) COLLATE "default")\n',
        "()\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_recorded_a_block_at_a_time_locks_rows_in_key_order",
        ),
    ),
    Mutation(
        "key-blocks-each-their-own-read",
        "a read recorded a block at a time is one read: its first block's time",
        "sql/queries/keys.sql",
        "    SELECT coalesce(%(at)s::timestamptz, statement_timestamp()) AS now\n",
        "    SELECT statement_timestamp() AS now\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_recorded_a_block_at_a_time_is_one_read",
        ),
    ),
    Mutation(
        "first-read-blocks-each-their-own-read",
        "a first read recorded a block at a time is one read: its first block's time",
        "sql/queries/keys.sql",
        "statement_timestamp()) AS now  -- (the first block's)",
        "statement_timestamp()) AS now0, statement_timestamp() AS now",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_recorded_a_block_at_a_time_is_one_read",
        ),
    ),
    Mutation(
        "removal-state-forgets-every-key",
        "a scan state a removal made has nothing to forget: a first read's keys stay presumed",
        "catchup/ledger/keys.py",
        '        if current[0] == "" != params["signature"]:  # a state a removal made: no',
        "        if False:  # a state a removal made: no",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_scan_after_rows_were_removed_forgets_nothing_no_scan_recorded",
        ),
    ),
    Mutation(
        "key-following-a-horizon-taken-as-presumed",
        "a key that follows a horizon vouching for nothing yet is not rewritten as presumed",
        "catchup/scan/verified.py",
        "        presumed = row.follows and unjudged\n",
        "        presumed = row.follows and not row.verified\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_scan_before_the_newest_day_ran_writes_no_key_and_judges_them_later",
        ),
    ),
    Mutation(
        "key-blocks-gone-seen-now",
        "a key gone in a later block of a read was last seen at the read before, not this one",
        "sql/queries/keys.sql",
        "                ELSE %(before)s::timestamptz END AS before",
        "                ELSE (SELECT j.keys_read_at FROM {schema}.jobs j"
        " WHERE j.id = %(job_id)s) END AS before",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_recorded_a_block_at_a_time_is_one_read",
        ),
    ),
    Mutation(
        "key-blocks-first-read-each",
        "a job's first read recorded a block at a time expects every key from the job's start",
        "sql/queries/keys.sql",
        "SELECT (SELECT count(*) FROM inserted), 0::bigint, true AS first_read,",
        "SELECT (SELECT count(*) FROM inserted), 0::bigint, NULL::boolean AS first_read,",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_recorded_a_block_at_a_time_is_one_read",
        ),
    ),
    Mutation(
        "keys-timeout-ignored",
        "a job's keys_timeout bounds a read of its keys query",
        "catchup/scan/keyed.py",
        "    return job.keys_timeout.total_seconds()",
        "    return 30.0",
        (
            "tests/integration/test_key_options.py::"
            "test_keys_timeout_bounds_a_read_of_the_keys_query",
        ),
    ),
    Mutation(
        "settled-first-scan-past-holes",
        "a first scan writes a key with holes as verified from its first expected period",
        "sql/queries/keys.sql",
        "               AND k.before + CASE WHEN m.m = p.n AND k.newest THEN 1 ELSE 0 END"
        " = m.m - k.b\n",
        "               AND k.before + CASE WHEN m.m = p.n AND k.newest THEN 1 ELSE 0 END"
        " = m.m - k.b OR true\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_scan_writes_what_it_verified_of_complete_keys_in_one_statement",
        ),
    ),
    Mutation(
        "settled-past-the-horizon-uncut",
        "a key without a row for a period past the horizon stops following it (its range cut)",
        "sql/queries/keys.sql",
        "                        ELSE j.verified * tstzmultirange(tstzrange(NULL, %(horizon)s))"
        " END",
        "                        ELSE j.verified END",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_scan_past_the_horizon_cuts_what_a_key_without_its_new_day_verified",
        ),
    ),
    Mutation(
        "read-only-scan-takes-changed-keys-as-held",
        "a read-only scan of keys that changed reads them all (a new key's days are gaps)",
        "catchup/scan/keyed.py",
        "        isinstance(read, KeysDiff) and read.job_id == t.job_id and not (read.changed or"
        " read.gone)",
        "        isinstance(read, KeysDiff) and read.job_id == t.job_id",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_read_only_scan_takes_unchanged_keys_as_recorded_and_reads_a_new_one",
        ),
    ),
    Mutation(
        "settle-cuts-before-the-tick-ran",
        "a scan before the tick runs the new day writes no key row (no key's range cut)",
        "sql/queries/keys.sql",
        "           CASE WHEN holed > expected * %(holed_share)s THEN p.n - 1 ELSE p.n END AS m",
        "           p.n AS m",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_scan_before_the_tick_runs_the_new_day_writes_no_key_row",
        ),
    ),
    Mutation(
        "settle-rewrites-following-keys",
        "a scan that moves the horizon writes no row of a key that follows it and has its rows",
        "sql/queries/keys.sql",
        "               THEN NOT t.follows OR (t.presumed AND NOT t.as_settled)\n",
        "               THEN true\n",
        (
            "tests/integration/test_key_writes.py::"
            "test_a_later_scan_or_tick_of_keys_that_did_not_change_writes_no_key_row",
        ),
    ),
    Mutation(
        "presumed-key-kept-unjudged",
        "the scan that first moves the horizon cuts a first read's presumed key without its rows",
        "sql/queries/keys.sql",
        "               ELSE t.follows END\n",
        "               ELSE t.follows AND NOT t.presumed END\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_reads_keys_are_presumed_complete_until_the_first_scan_judges_them",
        ),
    ),
    Mutation(
        "first-scan-writes-every-complete-key",
        "a first scan writes no row of a key the first read presumed complete, and complete",
        "sql/queries/keys.sql",
        "               THEN NOT t.follows OR (t.presumed AND NOT t.as_settled)\n",
        "               THEN NOT t.follows OR t.presumed\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_reads_keys_are_presumed_complete_until_the_first_scan_judges_them",
        ),
    ),
    Mutation(
        "presumed-key-kept-by-a-scan-in-python",
        "a scan of every key, in Python, cuts a first read's presumed key it found no row of",
        "catchup/scan/verified.py",
        "        presumed = row.follows and unjudged\n",
        "        presumed = False\n",
        (
            "tests/integration/test_key_evidence.py::"
            "test_a_key_that_never_ran_is_missing_in_every_scan",
        ),
    ),
    Mutation(
        "presumed-key-unseen-kept",
        "a first scan that judges no period a presumed key is expected in cuts its range",
        "sql/queries/keys.sql",
        "    WHERE CASE WHEN NOT t.seen THEN true\n",
        "    WHERE CASE WHEN NOT t.seen THEN false\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_first_scan_of_the_newest_day_alone_vouches_for_no_earlier_day",
        ),
    ),
    Mutation(
        "horizon-set-by-a-scan-of-no-key",
        "a scan of no key moves no horizon from none (a first read meanwhile is judged later)",
        "sql/queries/keys.sql",
        "           OR EXISTS (SELECT 1 FROM {schema}.job_keys WHERE job_id = %(job_id)s))\n",
        "           OR true)\n",
        ("tests/integration/test_key_reads.py::test_a_scan_of_no_key_sets_no_horizon",),
    ),
    Mutation(
        "gone-key-keeps-following",
        "a key found gone stops following the horizon: its days before it went are looked at",
        "sql/queries/keys.sql",
        "        verified = CASE WHEN upper_inf(k.verified)\n",
        "        verified = CASE WHEN false\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_key_gone_past_the_horizon_is_looked_at_for_its_days_before_it_went",
        ),
    ),
    Mutation(
        "presumed-key-kept-when-read-changes-it",
        "a key a read changes before any scan judged it is no longer presumed complete",
        "sql/queries/keys.sql",
        "                        WHEN upper_inf(k.verified)\n",
        "                        WHEN false\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_key_moved_while_a_scan_of_its_first_read_records_is_looked_at_again",
        ),
    ),
    Mutation(
        "settled-keys-failing-taken-as-succeeded",
        "a keyed job's newest success is a period some key succeeded in, settled keys' too",
        "catchup/scan/keyed.py",
        "        if settled.with_row(i) > len(held - names):",
        "        if settled.with_row(i):",
        (
            "tests/unit/scan/test_newest_success.py::"
            "test_every_settled_key_failed_the_newest_day_so_the_day_before_is_the_newest_success",
        ),
    ),
    Mutation(
        "markdown-budget",
        "a Markdown report always fits a GitHub job summary (under 1 MiB)",
        "catchup/render/documents.py",
        "MARKDOWN_BUDGET = 1_000_000",
        "MARKDOWN_BUDGET = 1_000_000_000",
        (
            "tests/unit/render/test_renderers.py::"
            "test_markdown_of_a_hundred_thousand_gap_ranges_fits_a_job_summary",
        ),
    ),
    Mutation(
        "narrow-console",
        "a console too narrow for a table gets whole names and dates, never cut cells",
        "catchup/render/tables.py",
        "    return sum(widths) + 3 * len(widths) + 1 <= console.width",
        "    return True",
        ("tests/integration/test_fleet.py::test_reports_at_80_columns_show_whole_names_and_dates",),
    ),
    Mutation(
        "tick-pool",
        "a tick holds a bounded pool of connections, whatever the number of due jobs",
        "catchup/replay/runs.py",
        "        workers=max(1, min(workers, planned)),",
        "        workers=max(1, planned),",
        (
            "tests/integration/test_fleet.py::"
            "test_a_tick_over_more_due_jobs_than_connections_runs_them_all",
        ),
    ),
    Mutation(
        "shared-heartbeat",
        "a pool renews every lease on one heartbeat connection",
        "catchup/replay/pool.py",
        "            own.share_heartbeats(heartbeats)",
        "            pass",
        (
            "tests/integration/test_fleet.py::"
            "test_a_pool_worker_renews_leases_on_one_shared_connection",
        ),
    ),
    Mutation(
        "window-order",
        "--since not before --until is refused, in both front ends, before anything is written",
        "catchup/scan/window.py",
        '            raise ConfigError(f"--since {iso_utc(lo)} is not before '
        '--until {iso_utc(hi)}")',
        "            pass",
        ("tests/integration/test_facade.py::test_bad_input_is_refused_alike_and_writes_nothing",),
    ),
    Mutation(
        "local-midnight",
        "a bare date in --since/--until is each job's own local midnight",
        "catchup/scan/window.py",
        "        return parse_instant(value, job.timezone)",
        "        return parse_instant(value)",
        ("tests/integration/test_labels.py::test_since_and_until_are_the_jobs_local_midnight",),
    ),
    Mutation(
        "period-state-repair",
        "a ledger migrated before period_state() existed reaches the same schema as a fresh one",
        "sql/migrations/0006_period_state.sql",
        "CREATE OR REPLACE FUNCTION {schema}.period_state(",
        "CREATE OR REPLACE FUNCTION {schema}.period_state_again(",
        (
            "tests/integration/test_vocabulary.py::"
            "test_a_ledger_migrated_before_period_state_existed_gets_it",
        ),
    ),
    Mutation(
        "finish-fence",
        "a runner that lost its period can never overwrite the newer attempt's result",
        "sql/migrations/0014_keys.sql",
        "        WHERE job_id = p_job_id AND key = p_key AND period_start = p_period_start\n"
        "          AND attempt = p_attempt AND status = 'running'\n        RETURNING job_id",
        "        WHERE job_id = p_job_id AND key = p_key AND period_start = p_period_start\n"
        "          AND status = 'running'\n        RETURNING job_id",
        (
            "tests/integration/test_concurrency.py::"
            "test_a_finish_after_a_takeover_is_refused_by_the_fence",
            "tests/integration/test_ledger.py::"
            "test_expired_lease_is_taken_over_and_the_old_attempt_is_fenced",
        ),
    ),
    Mutation(
        "cancel-reaches-the-next-attempt",
        "a cancel stops the attempt it named, never the attempt that runs the period next",
        "sql/queries/claims.sql",
        "  ON c.job_id = n.job_id AND c.key = n.key AND c.period_start = n.period_start\n"
        " AND c.attempt = n.attempt;",
        "  ON c.job_id = n.job_id AND c.key = n.key AND c.period_start = n.period_start;",
        (
            "tests/integration/test_cancel.py::"
            "test_cancel_from_another_process_stops_the_job_and_the_next_tick_runs_it",
        ),
    ),
    Mutation(
        "cancel-is-not-heard",
        "a running job whose heartbeat saw a cancel request stops",
        "catchup/execution/runner.py",
        "    if keeper.cancel is not None:\n        return Ended.cancelled, keeper.cancel\n",
        "",
        (
            "tests/integration/test_cancel.py::"
            "test_cancel_from_another_process_stops_the_job_and_the_next_tick_runs_it",
        ),
    ),
    Mutation(
        "cancel-counts-a-failure",
        "a cancelled attempt counts no failure: no backoff, the period runnable again at once",
        "catchup/claims/path.py",
        "        RunStatus.failed, AttemptStatus.cancelled, False, OutcomeStatus.cancelled",
        "        RunStatus.failed, AttemptStatus.cancelled, True, OutcomeStatus.cancelled",
        (
            "tests/integration/test_cancel.py::"
            "test_cancel_from_another_process_stops_the_job_and_the_next_tick_runs_it",
        ),
    ),
    Mutation(
        "batch-cancel-not-heard",
        "a cancel reaches a period running in a batch, through the batch's one renewal",
        "sql/queries/batches.sql",
        "SELECT n.key, n.period_start, n.lease_expires_at, c.actor, c.reason\n",
        "SELECT n.key, n.period_start, n.lease_expires_at, NULL::text, NULL::text\n",
        ("tests/integration/test_cancel.py::test_cancel_of_a_keyed_period_in_a_batch",),
    ),
    Mutation(
        "page-autoescape",
        "what users and jobs wrote is text on the status pages, never markup or a script",
        "catchup/render/web.py",
        "        autoescape=True,\n",
        "        autoescape=False,\n",
        (
            "tests/integration/test_serve_period.py::"
            "test_a_period_page_says_why_and_every_attempt_escaped",
        ),
    ),
    Mutation(
        "page-control-characters",
        "a bidirectional override or an escape sequence a job wrote is shown escaped on a page",
        "catchup/render/web.py",
        "    return safe(value, lines=True) if isinstance(value, str) else value\n",
        "    return value\n",
        (
            "tests/integration/test_serve_period.py::"
            "test_a_period_page_says_why_and_every_attempt_escaped",
        ),
    ),
    Mutation(
        "page-accessible",
        "every status page passes axe-core with no serious or critical violation",
        "catchup/render/templates/base.html.j2",
        '<html lang="en">',
        "<html>",
        ("tests/integration/test_browser.py::test_the_status_page_in_a_real_browser",),
    ),
    Mutation(
        "page-keyboard",
        "the keyboard reaches every link and control of a status page",
        "catchup/render/templates/base.html.j2",
        '<a class="skip" href="#main">',
        '<a class="skip" href="#main" tabindex="-1">',
        ("tests/integration/test_browser.py::test_the_status_page_in_a_real_browser",),
    ),
    Mutation(
        "scheduler-term-fence",
        "a leader whose term ended (paused, cut off, taken over) starts no tick under it",
        "catchup/scheduler/leading.py",
        "                term = keeper.renew()\n"
        "                if term is None or stopping.is_set():\n",
        "                term = keeper.term or 0\n                if stopping.is_set():\n",
        (
            "tests/integration/test_leader.py::"
            "test_a_leader_whose_term_was_taken_starts_no_tick_under_it",
        ),
    ),
    Mutation(
        "leader-lease",
        "a live lead is never taken: a standby waits for the lease to run out or be handed back",
        "sql/queries/leader.sql",
        "   OR l.expires_at <= clock_timestamp()\n",
        "   OR true\n",
        ("tests/integration/test_leader.py::test_the_lead_is_taken_kept_lost_and_handed_back",),
    ),
    Mutation(
        "leader-resumes-after-a-cut",
        "a leader whose connection was cut keeps its live term on reconnecting (no handover)",
        "catchup/scheduler/leading.py",
        "            asked = held or self._cut or 0\n",
        "            asked = held or 0\n",
        (
            "tests/integration/test_leader.py::"
            "test_a_leader_whose_connection_was_ended_resumes_its_live_term",
        ),
    ),
    Mutation(
        "scheduler-ticks-unmarked",
        "the scheduler's ticks carry its term: a failover's two leaders are not a crowd",
        "sql/queries/changes.sql",
        "    INSERT INTO {schema}.ticks (host, term) VALUES (%(host)s, %(term)s)\n",
        "    INSERT INTO {schema}.ticks (host, term) VALUES (%(host)s, NULL)\n",
        ("tests/integration/test_pulse_leader.py::test_the_schedulers_own_ticks_are_not_a_crowd",),
    ),
    Mutation(
        "tick-beside-leader-unseen",
        "a `catchup tick` (a CronJob) running beside a leading scheduler is warned about",
        "sql/queries/changes.sql",
        "WHERE term IS NULL AND at >= greatest(",
        "WHERE term IS NOT NULL AND at >= greatest(",
        (
            "tests/integration/test_pulse_leader.py::"
            "test_a_tick_beside_a_leading_scheduler_is_warned_about",
        ),
    ),
    Mutation(
        "replays-count-as-late-starts",
        "due-to-start latency counts the periods that fell due in the last hour, not replays",
        "catchup/scheduler/pulse.py",
        "        if now - due <= LATENESS_WINDOW and started >= due:",
        "        if started >= due:",
        (
            "tests/integration/test_pulse_leader.py::"
            "test_due_to_start_latency_is_in_the_json_and_the_metrics",
        ),
    ),
    Mutation(
        "reload-switches-ledger",
        "a reloaded config never moves a running scheduler to another ledger",
        "catchup/config/reloading.py",
        "            if ledger_of(new) != ledger_of(used):\n",
        "            if False:\n",
        (
            "tests/integration/test_scheduler_reload.py::"
            "test_the_config_is_reloaded_and_a_bad_one_refused_without_a_restart",
        ),
    ),
    Mutation(
        "readyz-ignores-a-refused-config",
        "/readyz answers 503 while the config file does not load (the last good one in use)",
        "catchup/serve/watcher.py",
        "        if view.error is not None or view.finished is None or self.notice() is not None:",
        "        if view.error is not None or view.finished is None:",
        (
            "tests/integration/test_scheduler_reload.py::"
            "test_the_config_is_reloaded_and_a_bad_one_refused_without_a_restart",
        ),
    ),
    Mutation(
        "serve-bound-after-writing",
        "a --serve port that cannot be bound is refused before the ledger is written",
        "catchup/api/scheduling.py",
        "        if serve is not None:  # bound first: a bad port is refused, nothing written\n",
        "        self._open()\n        if serve is not None:\n",
        (
            "tests/integration/test_scheduler_reload.py::"
            "test_a_serve_port_that_cannot_be_bound_is_refused_before_anything_is_written",
        ),
    ),
    Mutation(
        "database-create-race",
        "commands started together on a fresh embedded server all find the project's database",
        "catchup/ledger/base.py",
        "        except pg_errors.UniqueViolation as exc:\n",
        "        except ZeroDivisionError as exc:\n",
        (
            "tests/integration/test_leader.py::"
            "test_replicas_starting_at_once_create_the_project_database_once",
        ),
    ),
    Mutation(
        "heartbeat-fence",
        "an old attempt cannot keep a taken-over period's lease alive",
        "sql/queries/claims.sql",
        "      AND attempt = %(attempt)s AND status = 'running'"
        " AND lease_expires_at > clock_timestamp()\n"
        "    RETURNING job_id, key, period_start, attempt, lease_expires_at\n)\n"
        "SELECT n.lease_expires_at, c.actor, c.reason",
        "      AND status = 'running' AND lease_expires_at > clock_timestamp()\n"
        "    RETURNING job_id, key, period_start, attempt, lease_expires_at\n)\n"
        "SELECT n.lease_expires_at, c.actor, c.reason",
        (
            "tests/integration/test_ledger.py::"
            "test_expired_lease_is_taken_over_and_the_old_attempt_is_fenced",
        ),
    ),
    Mutation(
        "overlap-not-exists",
        "no two periods of an overlap-forbidden job run at once",
        "sql/migrations/0030_attempts_after_history.sql",
        "        AND (p_allow_overlap OR p_whole_job OR NOT EXISTS (",
        "        AND (true OR p_whole_job OR NOT EXISTS (",
        (
            "tests/integration/test_ledger.py::test_forbid_blocks_other_periods_while_one_runs",
            "tests/integration/test_ledger.py::test_the_job_lock_serialises_claims_of_one_job",
        ),
    ),
    Mutation(
        "forbid-job-guard",
        "with overlap = forbid-job, no two periods of the job run at once, whatever their keys",
        "sql/migrations/0030_attempts_after_history.sql",
        "        AND (p_allow_overlap OR NOT p_whole_job OR NOT EXISTS (",
        "        AND (true OR NOT p_whole_job OR NOT EXISTS (",
        ("tests/integration/test_keys.py::test_overlap_is_forbidden_per_key_unless_forbid_job",),
    ),
    Mutation(
        "job-lock",
        "claims of one forbid job are serialised (the overlap check sees the other's row)",
        "sql/migrations/0030_attempts_after_history.sql",
        "        PERFORM pg_advisory_xact_lock(\n"
        "            hashtext(CASE WHEN p_key = '' OR p_whole_job THEN p_lock_space\n"
        "                          ELSE p_lock_space || '/' || p_key END),\n"
        "            p_job_id::integer);",
        "        NULL;",
        ("tests/integration/test_ledger.py::test_the_job_lock_serialises_claims_of_one_job",),
    ),
    Mutation(
        "claim-reclaim",
        "a claim that committed though its answer was lost is reclaimed, not left to expire",
        "catchup/claims/reconnecting.py",
        "        if reconnected and (",
        "        if False and (",
        ("tests/faults/test_faults.py::test_a_claim_whose_commit_answer_is_lost_is_reclaimed",),
    ),
    Mutation(
        "alert-ranges-meet-by-state",
        "a told gap range meets current ranges of its own state: a missing period that fails"
        " is told",
        "catchup/reports/alerts.py",
        "            and range_.state == state\n",
        "",
        ("tests/integration/test_alerts.py::test_ranges_meet_by_state",),
    ),
    Mutation(
        "attempt-shown-whole",
        "one attempt asked for (--attempt) is shown whole, for every key",
        "catchup/render/tables.py",
        "    whole = len(result.attempts) == 1 or result.attempt is not None",
        "    whole = len(result.attempts) == 1",
        ("tests/integration/test_attempts.py::test_one_attempt_of_every_key_is_shown_whole",),
    ),
    Mutation(
        "failed-keys-bounded",
        "catchup_failed_keys names [serve] metric_keys keys per job, not every failed key",
        "catchup/results.py",
        "        return heapq.nsmallest(most, counts.items(), key=lambda kv: (-kv[1], kv[0]))",
        "        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))",
        (
            "tests/integration/test_alerts.py::"
            "test_failed_keys_on_metrics_stay_bounded_at_ten_thousand",
        ),
    ),
    Mutation(
        "alert-says-why",
        "an alert of failed periods quotes why the newest failed and links to its period",
        "catchup/reports/alerts.py",
        "    found = ledger.alert_failure(job_id, event.first, event.last, key)",
        "    found = None",
        (
            "tests/integration/test_alerts.py::"
            "test_an_alert_names_the_failed_key_and_why_and_links_its_period",
        ),
    ),
    Mutation(
        "alert-slack-escaped",
        "a key that is Slack markup (<!channel>) is escaped in the alert's text, never obeyed",
        "catchup/reports/alerts.py",
        '    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")',
        "    return text",
        ("tests/integration/test_alerts.py::test_a_key_that_is_slack_markup_is_escaped",),
    ),
    Mutation(
        "plan-counts-what-changes",
        "plan counts the periods the change runs at once, not those due anyway",
        "catchup/reports/plan.py",
        "    new_items = chosen - earlier\n",
        "    new_items = chosen\n",
        (
            "tests/integration/test_plan.py::test_an_added_job_runs_at_once_what_an_unchanged_one_would_run_anyway",
        ),
    ),
    Mutation(
        "renamed-never-held",
        "a job renamed_from one the ledger has is never held (tick, plan), whatever else went",
        "catchup/session.py",
        "            if self.config.jobs[name].renamed_from not in taken\n",
        "            if True\n",
        (
            "tests/integration/test_rename_hold.py::"
            "test_a_job_renamed_from_one_the_ledger_has_is_never_held_by_another_dropped_one",
            "tests/integration/test_plan.py::"
            "test_a_rename_is_said_and_runs_nothing_and_a_lookalike_is_held",
        ),
    ),
    Mutation(
        "read-only-session-registers-nothing",
        "a session that only reads (plan) asks a job's id, never registers or renames it",
        "catchup/session.py",
        "        if not self.writes:  # a session that only reads registers nothing: -1 has no"
        " row\n",
        "        if False:\n",
        (
            "tests/integration/test_plan.py::test_a_rename_is_said_and_runs_nothing_and_a_lookalike_is_held",
        ),
    ),
    Mutation(
        "plan-connection-read-only",
        "plan's connection refuses every write (default_transaction_read_only)",
        "sql/queries/base.sql",
        "SET default_transaction_read_only = on;",
        "SET default_transaction_read_only = off;",
        ("tests/integration/test_plan.py::test_a_plans_connection_refuses_every_write",),
    ),
    Mutation(
        "log-output-past-progress",
        "a job's logged lines go to catchup's stderr while a progress bar has taken it over",
        "catchup/execution/output.py",
        "    while isinstance(stream, (_ThreadOutput, FileProxy)):",
        "    while isinstance(stream, _ThreadOutput):",
        (
            "tests/integration/test_log_output.py::test_logged_lines_go_to_stderr_whole_while_a_progress_bar_draws",
        ),
    ),
    Mutation(
        "keys-listed-a-page-at-a-time",
        "catchup keys and /keys/NAME read a page of keys, never every key at once",
        "catchup/scan/keyed.py",
        "    rows = ledger.key_page(job_id, after, None if limit is None else limit + 1)\n",
        "    rows = ledger.key_page(job_id, after, None)\n",
        ("tests/integration/test_key_reads.py::test_keys_are_listed_a_page_at_a_time",),
    ),
    Mutation(
        "client-gone-not-said",
        "serve says nothing of a client that hung up mid-answer, and one line of any other failure",
        "catchup/serve/httpd.py",
        "        if kind is None or issubclass(kind, CLIENT_GONE):\n",
        "        if kind is None:\n",
        ("tests/unit/serve/test_httpd_errors.py",),
    ),
    Mutation(
        "first-read-raced-never-recorded",
        "a first read raced by another is not recorded, nor waits: the other read's record stands",
        "catchup/ledger/keys.py",
        "            if locked is None or (diff.first_read and self.has_keys(job_id)):\n",
        "            if locked is None:\n",
        (
            "tests/integration/test_key_reads.py::test_a_first_read_raced_by_another_is_not_recorded",
        ),
    ),
    Mutation(
        "first-read-twice-unseen",
        "a key a first read returns twice is refused, as a later read refuses it",
        "sql/queries/keys.sql",
        "           q.key = lag(q.key) OVER w AS twice\n",
        "           false AS twice\n",
        ("tests/integration/test_key_reads.py::test_a_first_read_refuses_what_every_read_refuses",),
    ),
    Mutation(
        "first-read-odd-unseen",
        "a first read's null, empty or overlong key is refused, as a later read refuses it",
        "sql/queries/keys.sql",
        " WHERE s.key IS NULL OR s.key = '' OR length(s.key) > 200\n",
        " WHERE false\n",
        ("tests/integration/test_key_reads.py::test_a_first_read_refuses_what_every_read_refuses",),
    ),
    Mutation(
        "first-read-dates-misaligned",
        "a first read's keys in blocks are each expected from their own date",
        "sql/queries/keys.sql",
        "        array_agg(s.expected_from ORDER BY s.n)\n",
        "        array_agg(s.expected_from ORDER BY s.expected_from)\n",
        (
            "tests/integration/test_key_reads.py::"
            "test_a_dated_first_read_in_blocks_keeps_each_keys_own_date",
        ),
    ),
    Mutation(
        "prejudged-keys-unchecked",
        "what was judged beside a first read is written only over the keys it judged",
        "sql/queries/keys.sql",
        "    SELECT {digest} = %(digest)s::numeric[] AND count(k.gone_at) = 0\n",
        "    SELECT true\n",
        (
            "tests/integration/test_prejudge.py::test_a_judgement_is_of_the_keys_the_job_holds",
            "tests/integration/test_prejudge.py::"
            "test_a_judgement_that_does_not_hold_leaves_the_scan_to_settle_the_keys",
        ),
    ),
    Mutation(
        "prejudged-after-rows-went",
        "what was judged beside a first read is not written once a row it counted went",
        "catchup/ledger/keys.py",
        "                if not self._scan_state_holds(params, judged.state, None):\n"
        "                    return False\n"
        '                self.conn.execute(self._q("keys_by_index"))',
        '                self.conn.execute(self._q("keys_by_index"))',
        (
            "tests/integration/test_prejudge.py::"
            "test_what_was_judged_is_written_only_while_no_row_went_and_each_key_is_as_read",
        ),
    ),
    Mutation(
        "prejudged-key-changed-written",
        "what was judged beside a first read is written only while each key is as it judged it",
        "sql/queries/keys.sql",
        "           AND coalesce(bool_and(k.verified IS NOT DISTINCT FROM tstzmultirange(\n"
        "                   tstzrange(greatest(k.expected_from, %(start)s), NULL))), false)"
        " AS same\n",
        "           AS same\n",
        (
            "tests/integration/test_prejudge.py::"
            "test_what_was_judged_is_written_only_while_no_row_went_and_each_key_is_as_read",
        ),
    ),
    Mutation(
        "prejudged-past-its-most",
        "a judgement beside a first read that would write more keys than it holds steps aside",
        "catchup/ledger/keys.py",
        "    if read is None or len(los) > PREJUDGED_MOST or read[1][0] == 0:\n",
        "    if read is None or read[1][0] == 0:\n",
        (
            "tests/integration/test_prejudge.py::"
            "test_a_judgement_of_more_keys_than_it_may_hold_steps_aside",
        ),
    ),
    Mutation(
        "prejudged-forgotten-key-written",
        "what was judged beside a first read is not written over a key whose ranges went null",
        "sql/queries/keys.sql",
        "bool_and(k.verified IS NOT DISTINCT FROM tstzmultirange(\n",
        "bool_and(k.verified = tstzmultirange(\n",
        (
            "tests/integration/test_prejudge.py::"
            "test_what_was_judged_is_written_only_while_no_row_went_and_each_key_is_as_read",
        ),
    ),
    Mutation(
        "prejudged-other-periods-taken",
        "a judgement of a first read made for other periods than the scan's is not taken",
        "catchup/scan/prejudge.py",
        "        if done is None or self._periods[name] != tuple(periods):\n",
        "        if done is None:\n",
        ("tests/integration/test_prejudge.py::test_a_judgement_of_other_periods_is_not_taken",),
    ),
    Mutation(
        "prejudged-tick-window-unjudged",
        "a tick's first read of a job's keys is judged for its catchup_window, as it scans",
        "catchup/replay/runs.py",
        "    ready = prepare(session, jobs, scanned_from=_tick_scanned_from)\n",
        "    ready = prepare(session, jobs)\n",
        (
            "tests/integration/test_prejudge.py::"
            "test_a_first_tick_writes_what_was_judged_for_its_catchup_window",
        ),
    ),
    Mutation(
        "prejudged-unscanned-judged",
        "a tick judges the first reads only of the jobs it scans (catch-up all)",
        "catchup/replay/runs.py",
        '    return _tick_since(job, now) if job.catchup == "all" else None\n',
        "    return _tick_since(job, now)\n",
        (
            "tests/integration/test_prejudge.py::"
            "test_a_first_tick_writes_what_was_judged_for_its_catchup_window",
        ),
    ),
    Mutation(
        "prejudged-run-judged",
        "catchup run of a keyed job, which scans nothing, judges no first read",
        "catchup/replay/runs.py",
        "    ready = prepare(session, [job], scanned_from=_unscanned)\n",
        "    ready = prepare(session, [job])\n",
        ("tests/integration/test_prejudge.py::test_a_run_of_every_key_judges_nothing",),
    ),
    Mutation(
        "settle-compacted-uncounted",
        "a settle counts a key's compacted periods as done, as the periods view has them",
        "sql/queries/keys.sql",
        " + coalesce(c.n - c.newest::int, 0) END\n",
        " END\n",
        (
            "tests/integration/test_compaction.py::"
            "test_a_first_scan_counts_a_keyed_jobs_compacted_periods_as_done",
        ),
        also=(
            (
                "ELSE coalesce(a.newest, false) OR coalesce(c.newest, false) END AS newest",
                "ELSE coalesce(a.newest, false) END AS newest",
            ),
        ),
    ),
    Mutation(
        "keys-query-percent-as-written",
        "a keys query's % reaches the server as written when its columns are probed",
        "catchup/ledger/keys.py",
        "    columns = conn.execute(probe, {}).description\n",
        "    columns = conn.execute(probe).description\n",
        (
            "tests/integration/test_key_reads.py::test_a_keys_query_with_a_percent_sign_is_read_as_written",
        ),
    ),
    Mutation(
        "first-read-scans-the-key-history-per-key",
        "a first read looks no key up in the key history (none held), never a scan of it per key",
        "catchup/ledger/keys.py",
        '            if first["first_read"] is True and not gone\n',
        "            if False\n",
        (
            "tests/integration/test_key_reads.py::test_a_first_read_into_an_analyzed_empty_key_history_looks_no_key_up",
        ),
    ),
    Mutation(
        "every-keys-page-counts-every-key",
        "a page of keys after the first takes the first page's counts, not a count of every key",
        "catchup/scan/keyed.py",
        "    counts = ledger.key_counts(job_id) if counts is None else counts\n",
        "    counts = ledger.key_counts(job_id)\n",
        ("tests/integration/test_key_reads.py::test_keys_are_listed_a_page_at_a_time",),
    ),
    Mutation(
        "republish-over-a-newer-scan",
        "a page rendered again never replaces a view a scan published while it was rendered",
        "catchup/serve/watcher.py",
        "            if over is None or self._view is over:\n",
        "            if True:\n",
        (
            "tests/unit/serve/test_republish_race.py::test_a_page_rendered_again_never_replaces_a_newer_scan",
        ),
    ),
    Mutation(
        "leader-unsaid-before-a-tick",
        "the page names the scheduler's leader before its first tick is recorded",
        "catchup/render/web.py",
        '            text = f"no tick recorded yet; {leader_text(pulse)}"\n',
        "            pass\n",
        (
            "tests/unit/render/test_pulse_before_a_tick.py::test_the_leader_is_named_before_its_first_tick_is_recorded",
        ),
    ),
    Mutation(
        "evidence-query-percent-as-written",
        "an evidence query's % reaches the server as written when its column is probed",
        "catchup/ledger/evidence.py",
        "        cur = self.conn.execute(probe, {})",
        "        cur = self.conn.execute(probe)",
        (
            "tests/integration/test_evidence.py::test_an_evidence_query_with_a_percent_sign_is_read_as_written",
        ),
    ),
    Mutation(
        "null-dated-keys-compare-whole",
        "a dated keys query with NULL dates, unchanged, compares whole as alike (no key joined)",
        "catchup/ledger/keys.py",
        '    if name != "keys_diff" or kind is None:\n        return since\n',
        "    if True:\n        return since\n",
        (
            "tests/integration/test_key_reads.py::test_a_dated_keys_query_with_null_dates_compares_whole_as_unchanged",
        ),
    ),
    Mutation(
        "plan-says-a-failing-keys-query",
        "plan says a keys query that fails, never plans it as keys unchanged",
        "catchup/reports/plan.py",
        "            for k in current_keys(session.ledger, job, job_id, now, False)\n",
        "            for k in known_keys(session.ledger, job, job_id, now)\n",
        (
            "tests/integration/test_plan.py::test_a_paused_job_a_job_back_and_a_failing_keys_query_are_said",
        ),
        also=(
            (
                "from ..scan.keyed import KeysFailed, current_keys",
                "from ..scan.keyed import KeysFailed, current_keys, known_keys",
            ),
        ),
    ),
    Mutation(
        "log-output-bounded",
        "a job's logged output stops at 1,000 lines per attempt, the rest counted",
        "catchup/execution/output.py",
        "        if self.logged >= self.limit:\n",
        "        if False:\n",
        ("tests/integration/test_log_output.py::test_logged_lines_are_bounded_per_attempt",),
    ),
    Mutation(
        "log-output-escaped",
        "a job's logged line shows its control characters escaped, never obeyed",
        "catchup/execution/output.py",
        '        text = safe(line.decode("utf-8", errors="replace").removesuffix("\\r"))',
        '        text = line.decode("utf-8", errors="replace").removesuffix("\\r")',
        (
            "tests/integration/test_log_output.py::test_a_jobs_output_is_logged_with_its_period_and_attempt",
        ),
    ),
    Mutation(
        "log-key-quoted",
        "a logged line's key that holds a space, a quote or = is quoted and reads back as itself",
        "catchup/render/text.py",
        "    if text and not any(c in text for c in ' \"=\\\\') and text.isprintable():",
        "    if text:",
        (
            "tests/integration/test_log_output.py::test_log_output_logs_every_jobs_keys_whole_lines_quoted",
        ),
    ),
    Mutation(
        "log-call-traceback",
        "a logged call that raises has its traceback logged (why it failed in the log)",
        "catchup/execution/runner.py",
        "        if traceback:\n            lines.add(",
        "        if False:\n            lines.add(",
        ("tests/integration/test_log_output.py::test_a_calls_output_and_traceback_are_logged",),
    ),
    Mutation(
        "tail-one-pipe",
        "a job not streamed writes stdout and stderr to one pipe: its tail keeps their order",
        "catchup/execution/runner.py",
        "        stderr=subprocess.PIPE if stream else subprocess.STDOUT,",
        "        stderr=subprocess.PIPE,",
        (
            "tests/integration/test_attempts.py::"
            "test_a_replayed_attempts_tail_keeps_stdout_and_stderr_in_the_order_written",
        ),
    ),
    Mutation(
        "history-every-attempts-output",
        "history --period shows every attempt's output, not only the latest's",
        "catchup/render/tables.py",
        "    for row in result.attempts:\n        who = ",
        "    for row in result.attempts[:1]:\n        who = ",
        (
            "tests/integration/test_attempts.py::"
            "test_a_failed_attempts_output_is_found_after_its_retry_succeeded",
        ),
    ),
    Mutation(
        "claim-reads-reconnect",
        "a read around a claim (a suspect's failover) cut off is asked again, not exit 3",
        "catchup/claims/path.py",
        "        claim = through_reconnects(\n"
        "            session, lambda _: _claim_now(session, job, job_id, period, label, rules)\n"
        "        )",
        "        claim = _claim_now(session, job, job_id, period, label, rules)",
        ("tests/faults/test_faults.py::test_a_read_before_a_claim_cut_off_is_asked_again",),
    ),
    Mutation(
        "worker-session-reopened",
        "a replay worker's session cut off as it opens is opened again, not exit 3",
        "catchup/replay/pool.py",
        "        with open_surely(lambda: Session(self.config, self.target)) as own:",
        "        with Session(self.config, self.target) as own:",
        (
            "tests/faults/test_faults.py::"
            "test_a_workers_session_cut_off_as_it_opens_is_opened_again",
        ),
    ),
    Mutation(
        "handoff-reclaim",
        "a next claim committed with a finish whose answer was lost is reclaimed, never left",
        "catchup/claims/reconnecting.py",
        "        return finished, UNCLAIMED if reclaimed is None else reclaimed",
        "        return finished, UNCLAIMED",
        (
            "tests/integration/test_handoff.py::test_a_lost_answer_to_finish_then_claim_reclaims_the_claim",
        ),
    ),
    Mutation(
        "handoff-fallback",
        "a finish whose carried claim failed is recorded on its own, not lost with the claim",
        "catchup/claims/reconnecting.py",
        "        return finish_surely(session, job_id, period_start, attempt, key, **fields),"
        " UNCLAIMED",
        "        raise",
        (
            "tests/integration/test_handoff.py::"
            "test_a_next_claim_that_fails_leaves_the_finish_recorded",
        ),
    ),
    Mutation(
        "handoff-release",
        "a claim handed over with a finish but never started is given back, not left running",
        "catchup/replay/pool.py",
        "                            record(release(session, item.job, item.period, claimed))",
        "                            pass",
        ("tests/integration/test_handoff.py::test_a_handed_claim_that_will_not_run_is_given_back",),
    ),
    Mutation(
        "evidence-local-date",
        "a date of evidence is the job's local day, also across a DST change",
        "sql/queries/evidence.sql",
        "(e.v::timestamp AT TIME ZONE %(zone)s)",
        "(e.v::timestamp AT TIME ZONE 'UTC')",
        (
            "tests/integration/test_evidence.py::"
            "test_a_date_column_is_local_midnight_across_a_dst_change",
        ),
    ),
    Mutation(
        "evidence-unverified",
        "a success that left no evidence is a gap, not a success",
        "sql/queries/evidence.sql",
        "    SELECT DISTINCT row_start FROM walked WHERE kind = 1 AND held_until > t",
        "    SELECT DISTINCT row_start FROM walked WHERE kind = 1",
        (
            "tests/integration/test_evidence.py::"
            "test_hourly_timestamptz_evidence_finds_unverified_and_untracked",
        ),
    ),
    Mutation(
        "untracked-never-runs",
        "a period whose output exists and that the ledger never saw is not run again",
        "catchup/claims/path.py",
        "        if (refusal := _untracked(session, job, job_id, period, label)) is not None:",
        "        if (refusal := None) is not None:",
        ("tests/integration/test_evidence.py::test_onboarding_a_job_that_ran_from_cron",),
    ),
    Mutation(
        "verify-evidence",
        "with verify = true, a run that exits 0 but leaves no evidence is failed",
        "catchup/claims/path.py",
        "        execution = _verified(session, job, period, label, execution)",
        "        pass",
        ("tests/integration/test_evidence.py::test_verify_fails_a_success_that_left_nothing",),
    ),
    Mutation(
        "evidence-recheck-changed",
        "a later scan reads the evidence again for rows that finished since it was verified",
        "catchup/scan/evidence.py",
        "                *ledger.evidence_changed(job_id, lo, until, state.verified_at),",
        "",
        (
            "tests/integration/test_evidence.py::"
            "test_a_later_scan_reads_only_what_may_have_changed_and_misses_nothing",
        ),
    ),
    Mutation(
        "evidence-recheck-holes",
        "a later scan reads the evidence again in the periods that have no row",
        "catchup/scan/evidence.py",
        "                *[(max(i.first, lo), min(timeline.after(i.last), until)) for i in holes],",
        "",
        (
            "tests/integration/test_evidence.py::"
            "test_a_later_scan_reads_only_what_may_have_changed_and_misses_nothing",
        ),
    ),
    Mutation(
        "serve-read-only",
        "catchup serve never writes to the ledger",
        "catchup/api/looking.py",
        "calendars=True, pulse=True, read_only=True",
        "calendars=True, pulse=True, read_only=False",
        (
            "tests/integration/test_serve.py::"
            "test_the_page_shows_the_jobs_and_escapes_what_users_wrote",
        ),
    ),
    Mutation(
        "unregistered-ids",
        "jobs the ledger has no row for yet are scanned each on its own",
        "catchup/scan/detector.py",
        "            rows[job.name].id if job.name in rows else -n,",
        "            rows[job.name].id if job.name in rows else -1,",
        (
            "tests/integration/test_replay.py::"
            "test_a_dry_run_before_any_job_is_registered_plans_each_job_apart",
        ),
    ),
    Mutation(
        "alerts-lock",
        "replicas compare gap ranges one at a time, so a range is told once",
        "catchup/reports/alerts.py",
        "        ledger.lock_alerts()\n",
        "",
        ("tests/integration/test_alerts.py::test_the_alert_lock_serialises_notifiers",),
    ),
    Mutation(
        "alerts-delivered",
        "a post delivered is never sent again",
        "catchup/reports/alerts.py",
        "                ledger.alert_delivered(alert_id)",
        "                pass",
        (
            "tests/integration/test_alerts.py::"
            "test_a_failing_receiver_is_retried_and_nothing_is_posted_twice",
        ),
    ),
    Mutation(
        "alerts-backoff",
        "a failed post waits out its backoff before it is tried again",
        "sql/queries/alerts.sql",
        "    next_at = clock_timestamp() + least(interval '10 seconds' * power(2, attempts - 1),",
        "    next_at = clock_timestamp() + 0 * least(interval '10 seconds'"
        " * power(2, attempts - 1),",
        (
            "tests/integration/test_alerts.py::"
            "test_a_failing_receiver_is_retried_and_nothing_is_posted_twice",
        ),
    ),
    Mutation(
        "alerts-rate",
        "a webhook gets at most max_per_minute posts a minute",
        "catchup/reports/alerts.py",
        "        for _ in range(max(0, alerts.max_per_minute - sent.get(webhook.name, 0))):",
        "        for _ in range(100):",
        ("tests/integration/test_alerts.py::test_posts_beyond_the_rate_wait_their_turn",),
    ),
    Mutation(
        "takeover-needs-expired-lease",
        "a running period with a live lease is never taken over",
        "sql/migrations/0030_attempts_after_history.sql",
        "               AND r.lease_expires_at <= clock_timestamp()\n",
        "",
        (
            "tests/integration/test_ledger.py::test_new_period_is_claimed_once",
            "tests/integration/test_concurrency.py::test_16_replicas_on_one_period_run_it_once",
        ),
    ),
    Mutation(
        "finish-only-running",
        "a finish is applied once: a retried finish changes nothing",
        "sql/migrations/0014_keys.sql",
        "          AND attempt = p_attempt AND status = 'running'\n        RETURNING job_id",
        "          AND attempt = p_attempt\n        RETURNING job_id",
        ("tests/integration/test_ledger.py::test_a_finish_sent_twice_is_applied_once",),
    ),
    Mutation(
        "process-group-kill",
        "a timeout or a lost lease stops the job's whole process group, grandchildren too",
        "catchup/execution/runner.py",
        "        os.killpg(pgid, sig)",
        "        os.kill(pgid, sig)",
        (
            "tests/integration/test_run.py::test_timeout_kills_the_whole_process_group",
            "tests/faults/test_faults.py::test_killed_runner_takes_its_grandchildren_along",
        ),
    ),
    Mutation(
        "database-clock",
        "every time decision uses the database clock, not the host's",
        "catchup/session.py",
        "    def now(self) -> datetime:\n        return self.ledger.now()",
        "    def now(self) -> datetime:\n        return datetime.now().astimezone()",
        ("tests/faults/test_faults.py::test_host_clocks_that_disagree",),
    ),
    Mutation(
        "unrenderable-call",
        "a `call` whose exception cannot be rendered is a failure, never a success",
        "catchup/execution/runner.py",
        '    result: dict[str, str | None] = {"error": "the call ended without returning"}',
        "    result: dict[str, str | None] = {}",
        (
            "tests/integration/test_hostile_second.py::"
            "test_a_call_whose_exception_cannot_be_rendered_is_a_failure",
        ),
        also=(
            (
                "catchup/errors.py",
                "    try:\n        text = str(exc)\n    except BaseException:\n"
                '        return f"{name}: <its text could not be rendered>"\n',
                "    text = str(exc)\n",
            ),
        ),
    ),
    Mutation(
        "data-folder-removed",
        "a data folder catchup did not make (no marker, no server's data) is never removed",
        "catchup/postgres/datafolder.py",
        "        raise ConfigError(\n"
        '            f"CATCHUP_HOME: {data} holds files but no PostgreSQL data (no PG_VERSION): '
        '{hint}"\n'
        "        )\n",
        "        shutil.rmtree(data)\n        return\n",
        (
            "tests/integration/test_hostile_second.py::"
            "test_a_data_folder_catchup_did_not_make_is_never_removed",
        ),
    ),
    Mutation(
        "watcher-dies",
        "serve's watcher survives an unexpected error, and /healthz fails when it is gone",
        "catchup/serve/watcher.py",
        "            except Exception as exc:\n                # the watcher outlives any surprise",
        "            except ZeroDivisionError as exc:\n                # the watcher outlives",
        (
            "tests/integration/test_hostile_second.py::"
            "test_the_watcher_survives_any_error_and_healthz_follows_it",
        ),
    ),
    Mutation(
        "cannot-start-preflight",
        "a job that cannot start (program, module or folder missing) claims nothing, counts no "
        "attempt",
        "catchup/claims/path.py",
        "    if (why := session.cannot_start(job)) is not None:\n",
        "    if (why := session.cannot_start(job)) is not None and False:\n",
        ("tests/integration/test_first_week.py::test_what_cannot_start_counts_no_attempt",),
    ),
    Mutation(
        "renamed-reads-old-row",
        "a job renamed_from an old name reads that job's past, even before the rename is made",
        "catchup/session.py",
        "        for old, row in self.ledger.job_rows(list(olds)).items() if olds else ():",
        "        for old, row in self.ledger.job_rows(list(olds)).items() if False else ():",
        (
            "tests/integration/test_first_week.py::"
            "test_renamed_from_renames_on_the_first_command_that_writes",
        ),
    ),
    Mutation(
        "tick-fewest-first",
        "a job's on-time period never waits behind another job's backlog in a tick",
        "catchup/replay/runs.py",
        "    chosen_per_job.sort(key=lambda chosen: (len(chosen), chosen[0].job.name))\n",
        "",
        (
            "tests/integration/test_first_week.py::"
            "test_a_slow_backlog_never_holds_another_jobs_period",
        ),
    ),
    Mutation(
        "one-definition",
        "a job defined differently by another project is refused before anything is written",
        "catchup/session.py",
        "        self._check_definitions(rows)  # before anything is written\n",
        "",
        (
            "tests/integration/test_first_week.py::"
            "test_a_second_definition_of_a_job_is_refused_naming_both",
        ),
    ),
    Mutation(
        "serve-never-starts",
        "a running serve never starts an embedded server someone stopped",
        "catchup/api/looking.py",
        "            session = self._open(prepare=False, start_embedded=False, writes=False)\n",
        "            session = self._open(prepare=False, writes=False)\n",
        (
            "tests/integration/test_serve.py::"
            "test_a_stopped_embedded_server_stays_stopped_while_serve_runs",
        ),
    ),
    Mutation(
        "interrupted-state",
        "a period whose last attempt was interrupted is interrupted in reports, not failed",
        "sql/migrations/0023_cancelled_state.sql",
        "        WHEN interrupted THEN 'interrupted'\n",
        "",
        (
            "tests/integration/test_first_week.py::"
            "test_an_interrupted_period_is_its_own_state_in_every_report",
        ),
    ),
    Mutation(
        "upstream-gate",
        "a period whose upstream periods are not done is never claimed",
        "catchup/ledger/claims.py",
        "        if not r.needs:\n",
        "        if True:\n",
        (
            "tests/integration/test_chains.py::"
            "test_a_berlin_day_waits_for_every_export_hour_inside_it",
        ),
    ),
    Mutation(
        "upstream-row-lock",
        "a reset of an upstream period racing a downstream claim never lets the claim through",
        "sql/queries/claims.sql",
        "    WHERE u.job_id = n.job_id AND u.key = n.key AND u.period_start = n.period_start\n"
        "    FOR SHARE\n",
        "    WHERE u.job_id = n.job_id AND u.key = n.key AND u.period_start = n.period_start\n",
        ("tests/integration/test_chains.py::test_a_reset_racing_a_claim_never_lets_it_through",),
    ),
    Mutation(
        "pool-waits-for-upstream",
        "a worker pool starts a downstream period only once its upstream periods in the plan"
        " are done",
        "catchup/replay/dispatch.py",
        "            if any(self._unfinished[n] for n in item.needs if n != recording):\n",
        "            if False:\n",
        (
            "tests/integration/test_chains.py::"
            "test_a_replay_runs_upstream_before_downstream_on_the_ledger_clock",
        ),
    ),
    Mutation(
        "scan-blocked",
        "a missing period waiting for upstream periods not done is reported blocked",
        "catchup/scan/blocked.py",
        "        for a, b, active in carried(job, lo, hi, pieces) if own else pieces:\n",
        "        for a, b, active in []:\n",
        (
            "tests/integration/test_chains.py::"
            "test_the_scan_reports_exactly_the_day_a_failed_hour_blocks",
        ),
    ),
    Mutation(
        "scan-blocked-by-own-previous",
        "a missing period waiting for its own blocked previous period is blocked, by the root",
        "catchup/scan/blocked.py",
        "        for a, b, active in carried(job, lo, hi, pieces) if own else pieces:\n",
        "        for a, b, active in pieces:\n",
        (
            "tests/integration/test_chains.py::"
            "test_a_running_balance_names_the_failed_day_it_waits_for_every_day_after",
        ),
    ),
    Mutation(
        "upstream-evidence-gate",
        "a period whose upstream period succeeded without its evidence (unverified) is not claimed",
        "catchup/claims/path.py",
        "    if job.after and (waits := unverified_upstream(session, job, period)):\n",
        "    if False:\n",
        ("tests/integration/test_chains.py::test_an_unverified_upstream_period_blocks_like_a_gap",),
    ),
    Mutation(
        "scan-unverified-upstream",
        "a missing period waiting for an unverified upstream period is reported blocked",
        "catchup/scan/blocked.py",
        "                if p.start not in checked:\n",
        "                if True:\n",
        ("tests/integration/test_chains.py::test_an_unverified_upstream_period_blocks_like_a_gap",),
    ),
    Mutation(
        "scan-outdated",
        "a downstream period that finished before an upstream period it used ran again is outdated",
        "catchup/scan/outdated.py",
        '        stale = sorted(t for t, (ran, _) in done.items() if ran < latest[("", t)])\n',
        "        stale = sorted(t for t, (ran, _) in done.items() if 0)\n",
        (
            "tests/integration/test_chains.py::"
            "test_an_upstream_rerun_makes_its_downstream_outdated_and_replay_runs_it_once",
        ),
    ),
    Mutation(
        "upstream-gate-random-graphs",
        "on random graphs with racing, killed ticks, no attempt starts before its upstream is done",
        "catchup/ledger/claims.py",
        "        if not r.needs:\n",
        "        if True:\n",
        (
            "tests/integration/test_chains_property.py::"
            "test_no_claim_ever_starts_before_its_upstream_is_done",
        ),
    ),
    Mutation(
        "periods-view-casts-job",
        "a period is read through each table's primary key, in runs and in compacted alike",
        "sql/migrations/0020_compacted.sql",
        "SELECT NULL::bigint, c.job_id, c.key, c.period_start,\n",
        "SELECT NULL::bigint, c.job_id::integer::bigint, c.key, c.period_start,\n",
        (
            "tests/integration/test_compacted.py::"
            "test_a_periods_row_is_read_through_each_tables_primary_key",
        ),
    ),
    Mutation(
        "claims-not-durable",
        "with durable_claims a claim counts once the synchronous standby has applied it",
        "sql/queries/base.sql",
        "SET LOCAL synchronous_commit = 'remote_apply';",
        "SET LOCAL synchronous_commit = 'local';",
        ("tests/faults/test_replica.py::test_durable_claims_wait_for_the_synchronous_standby",),
    ),
    Mutation(
        "unconfirmed-claim-started",
        "a durable claim the synchronous standby did not confirm within its lease is not run",
        "catchup/ledger/base.py",
        "        if heard and timer is not None:\n",
        "        if False:\n",
        (
            "tests/faults/test_replica.py::"
            "test_a_durable_claim_the_standby_never_confirms_is_not_started",
        ),
    ),
    Mutation(
        "standby-taken-for-ledger",
        "a server that takes no writes is refused as the ledger, in one line",
        "catchup/postgres/database.py",
        "            refused = _read_only(conn) if writes else None\n",
        "            refused = None\n",
        (
            "tests/faults/test_replica.py::"
            "test_a_standby_or_a_read_only_primary_is_refused_in_one_line",
        ),
    ),
    Mutation(
        "suspect-claimed",
        "after a failover that may have lost claims, a period the new primary does not show "
        "settled is not claimed until it is decided",
        "sql/migrations/0030_attempts_after_history.sql",
        "        AND NOT ({schema}.is_suspect(seen, p_period_end, NULL, NULL, NULL)\n",
        "        AND NOT (false\n",
        (
            "tests/faults/test_suspects.py::test_without_durable_claims_"
            "every_lost_period_is_suspect_and_runs_once_after_its_decision",
        ),
    ),
    Mutation(
        "lost-row-not-recreated",
        "a runner whose claim a failover lost writes its row again and records its outcome",
        "sql/queries/claims.sql",
        "    WHERE n.claimed_at < w.seen_at\n",
        "    WHERE false\n",
        (
            "tests/faults/test_suspects.py::test_a_runner_whose_claim_a_failover_lost_"
            "writes_its_row_again_and_records_its_outcome[registered]",
        ),
    ),
    Mutation(
        "failover-unsaid",
        "the first command on a promoted standby says the ledger's server moved, and what opens",
        "catchup/session.py",
        "                self.moved = self.ledger.note_timeline()"
        "  # before the declaration records it\n",
        "                pass\n",
        (
            "tests/faults/test_failover.py::test_a_claim_that_does_not_wait_for_the_standby_"
            "opens_the_suspect_window_again",
        ),
    ),
    Mutation(
        "lost-job-row-not-recreated",
        "a runner whose claim a failover lost with its new job's row writes both again",
        "sql/queries/claims.sql",
        "    SELECT %(job_id)s::bigint, %(job)s::text FROM w\n    WHERE NOT EXISTS",
        "    SELECT %(job_id)s::bigint, %(job)s::text FROM w\n    WHERE false AND NOT EXISTS",
        (
            "tests/faults/test_suspects.py::test_a_runner_whose_claim_a_failover_lost_"
            "writes_its_row_again_and_records_its_outcome[new-job]",
        ),
    ),
    Mutation(
        "recreated-job-id-reused",
        "a job row written again moves the id sequence past it: a job added next does not clash",
        "sql/queries/claims.sql",
        "    SELECT setval(pg_get_serial_sequence(format('%%I.jobs', %(schema)s::text), 'id'),\n"
        "                  greatest(s.last_value, job.id))\n"
        "    FROM job, {schema}.jobs_id_seq s\n",
        "    SELECT 1 FROM job\n",
        (
            "tests/faults/test_suspects.py::test_a_runner_whose_claim_a_failover_lost_"
            "writes_its_row_again_and_records_its_outcome[new-job]",
        ),
    ),
    Mutation(
        "batch-lost-rows-not-renewed-again",
        "a batch's runner whose claims a failover lost writes their rows again at its heartbeat",
        "catchup/claims/lease.py",
        "            if gone:\n",
        "            if False:\n",
        (
            "tests/faults/test_suspects.py::test_a_batchs_runner_whose_claims_a_failover_lost_"
            "writes_their_rows_again",
        ),
    ),
    Mutation(
        "batch-lost-rows-not-recorded",
        "a batch's runner whose claims a failover lost writes their rows again at its finish",
        "catchup/claims/batch.py",
        "        if unrecorded := [place for place in range(len(ran)) if place not in finished]:\n",
        "        if unrecorded := []:\n",
        (
            "tests/faults/test_suspects.py::test_a_batchs_runner_whose_claims_a_failover_lost_"
            "writes_their_rows_again[finish]",
        ),
    ),
    Mutation(
        "async-claim-trusted",
        "a claim that does not wait for a synchronous standby undoes its timeline's durability",
        "sql/migrations/0021_timelines.sql",
        "    UPDATE {schema}.timelines SET durable = false\n",
        "    UPDATE {schema}.timelines SET durable = true\n",
        (
            "tests/faults/test_failover.py::test_a_claim_that_does_not_wait_"
            "for_the_standby_opens_the_suspect_window_again",
        ),
    ),
    Mutation(
        "durable-undeclared",
        "a ledger whose claims all wait for a synchronous standby opens no suspect window at a "
        "failover",
        "sql/migrations/0021_timelines.sql",
        "    UPDATE {schema}.timelines SET durable = true\n",
        "    UPDATE {schema}.timelines SET durable = false\n",
        (
            "tests/faults/test_failover.py::"
            "test_with_durable_claims_no_failover_runs_a_period_twice_or_loses_one",
        ),
    ),
    Mutation(
        "keyed-suspect-unseen",
        "a keyed job's scan shows the periods a failover left in doubt as suspect",
        "catchup/scan/keyed.py",
        "        found = suspects.apply_keyed(ledger, job, job_id, found, failover, first, end)\n",
        "        found = list(found)\n",
        (
            "tests/faults/test_suspects.py::test_a_keyed_jobs_lost_periods_are_suspect_"
            "in_its_scan_and_decided_per_key",
        ),
    ),
    Mutation(
        "reload-mid-write",
        "a config file caught between its truncation and its new content is not loaded",
        "catchup/config/reloading.py",
        "            if fingerprint(self.path) != seen:\n",
        "            if False:\n",
        (
            "tests/unit/config/test_reloading.py::test_a_file_caught_mid_write_is_read_once_it_settles",
        ),
    ),
    Mutation(
        "project-ledger-by-folder",
        "two folders of one [project] name share one ledger on the embedded server",
        "catchup/postgres/projectdb.py",
        "    if project.name is not None:\n        return named_database_name(project.name)\n",
        "",
        (
            "tests/integration/test_project_ledger.py::"
            "test_two_folders_of_one_project_share_a_ledger",
        ),
    ),
    Mutation(
        "project-ledger-left-behind",
        "a project's ledger kept under a folder's name is found, never left for an empty one",
        "catchup/postgres/projectdb.py",
        "        kept = _kept(conninfo, ledger, project) if project.name is not None else None\n",
        "        kept = None\n",
        (
            "tests/integration/test_project_ledger.py::"
            "test_a_ledger_kept_under_the_folders_name_is_found",
        ),
    ),
    Mutation(
        "project-twin-ledgers-unsaid",
        "doctor and the scheduler warn of a second ledger of one project on the server",
        "catchup/postgres/projectdb.py",
        "        if database != in_use\n",
        "        if False\n",
        (
            "tests/integration/test_project_ledger.py::"
            "test_two_ledgers_of_one_project_are_warned_of",
        ),
    ),
    Mutation(
        "pasted-unquoted",
        "a command printed to paste gives each value back as one argument (a hostile key too)",
        "catchup/render/pasted.py",
        '    return " ".join(shlex.quote(word) for word in words)\n',
        '    return " ".join(words)\n',
        (
            "tests/integration/test_pasted.py::test_why_and_its_json_quote_a_hostile_key",
            "tests/integration/test_pasted.py::test_the_pages_quote_a_hostile_key",
        ),
    ),
    Mutation(
        "kubernetes-names-unchecked",
        "deploy kubernetes takes only Kubernetes names for --secret and --config-map",
        "catchup/deploy/tick.py",
        "    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):\n",
        "    if False:\n",
        (
            "tests/integration/test_pasted.py::"
            "test_a_secret_or_config_map_that_is_no_kubernetes_name_is_refused",
        ),
    ),
    Mutation(
        "deploy-grace-zero",
        "a deploy recipe never writes --grace 0s, which the scheduler refuses",
        "catchup/cli/options.py",
        "            type=Seconds(max(1, SCHEDULER_GRACE.low), SCHEDULER_GRACE.high),\n",
        "            type=Seconds(SCHEDULER_GRACE.low, SCHEDULER_GRACE.high),\n",
        ("tests/integration/test_pasted.py::test_a_grace_under_a_second_is_refused",),
    ),
    Mutation(
        "dsn-repr-password",
        "no password in the repr or str of a job, a config or any result of the facade",
        "catchup/postgres/dsn.py",
        '        return f"<DSN {redact(self)}>"\n',
        "        return str.__repr__(self)\n",
        (
            "tests/integration/test_no_password_in_repr.py::"
            "test_a_job_and_a_config_show_their_dsns_without_the_password",
            "tests/integration/test_no_password_in_repr.py::"
            "test_every_result_of_the_facade_shows_no_password",
        ),
    ),
    Mutation(
        "job-dsn-plain",
        "a job holds its keys_dsn and evidence_dsn as DSNs whose repr has no password",
        "catchup/config/job.py",
        '        object.__setattr__(self, "keys_dsn", hidden(self.keys_dsn))\n'
        '        object.__setattr__(self, "evidence_dsn", hidden(self.evidence_dsn))\n',
        "        pass\n",
        (
            "tests/integration/test_no_password_in_repr.py::"
            "test_a_job_and_a_config_show_their_dsns_without_the_password",
            "tests/integration/test_no_password_in_repr.py::"
            "test_every_result_of_the_facade_shows_no_password",
        ),
    ),
    Mutation(
        "webhook-url-in-repr",
        "a webhook's URL (its path may hold a token) is not in the config's repr",
        "catchup/config/job.py",
        "    url: str = field(repr=False)  # its path and query may hold a token\n",
        "    url: str\n",
        (
            "tests/integration/test_no_password_in_repr.py::"
            "test_a_job_and_a_config_show_their_dsns_without_the_password",
        ),
    ),
    Mutation(
        "make-job-command-split",
        "make_job refuses a command given as a string (it became one-letter arguments)",
        "catchup/config/loading.py",
        "list(command) if isinstance(command, list | tuple) else command\n",
        "list(command)\n",
        ("tests/integration/test_api.py::test_code_is_checked_as_catchup_toml_is",),
    ),
    Mutation(
        "declared-twice",
        "two jobs declared in code under one name are refused (one was lost without a word)",
        "catchup/config/resolve.py",
        "        if job.name in declared:\n",
        "        if False:\n",
        ("tests/integration/test_api.py::test_code_is_checked_as_catchup_toml_is",),
    ),
    Mutation(
        "reason-unstorable",
        "a reason the ledger cannot store (NUL, a lone surrogate) is refused before any write",
        "catchup/api/base.py",
        "    if storable(reason) != reason:\n",
        "    if False:\n",
        (
            "tests/integration/test_api.py::test_a_reason_or_actor_the_ledger_cannot_keep_is_"
            "refused_before_anything_is_written",
        ),
    ),
    Mutation(
        "actor-unchecked",
        "an actor the ledger cannot store, or with an invisible character, is refused first",
        "catchup/api/base.py",
        '    if storable(actor) != actor or any(invisible(c) and c != " " for c in actor):\n',
        "    if False:\n",
        (
            "tests/integration/test_api.py::test_a_reason_or_actor_the_ledger_cannot_keep_is_"
            "refused_before_anything_is_written",
        ),
    ),
    Mutation(
        "cancelled-always-true",
        "`if ctx.cancelled:` is false until the call is told to stop",
        "catchup/execution/runner.py",
        "        return self.is_set()\n",
        "        return True\n",
        (
            "tests/integration/test_api.py::test_ctx_cancelled_is_false_until_the_call_is_told_to_stop",
        ),
    ),
    Mutation(
        "one-key-last-wins",
        "two different --key where one key is meant are refused, not the last one kept",
        "catchup/cli/options.py",
        "    if len(keys) > 1:\n",
        "    if False:\n",
        ("tests/integration/test_key_options.py::test_two_keys_where_one_is_meant_are_refused",),
    ),
    Mutation(
        "key-invisible",
        "a key with a zero-width, filler or direction-changing character is refused",
        "catchup/config/values.py",
        '    if any(c != " " and invisible(c) for c in key):',
        "    if False:",
        (
            "tests/integration/test_key_options.py::test_a_key_with_an_invisible_or_direction_changing_character_is_refused",
        ),
    ),
    Mutation(
        "all-keys-piecemeal",
        "a change of several keys' periods is one transaction: refused whole when one runs",
        "catchup/changes/operations.py",
        "    with session.transaction():\n        done = [change(job, periods)",
        "    if True:\n        done = [change(job, periods)",
        (
            "tests/integration/test_key_options.py::test_a_change_of_every_key_is_refused_whole_when_one_key_runs",
        ),
    ),
    Mutation(
        "ledger-in-the-sessions-zone",
        "a timestamp leaves the ledger in UTC (and periods are counted in UTC), whatever zone "
        "the server, database or role sets",
        "sql/queries/base.sql",
        "SELECT pg_catalog.set_config('TimeZone', 'UTC', false),\n       ",
        "SELECT ",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_every_page_answers_on_a_server_in_another_zone",
            "tests/integration/test_their_postgresql.py::"
            "test_a_role_that_owns_only_its_schema_migrates_replays_scans_and_compacts",
        ),
    ),
    Mutation(
        "ledger-in-the-sessions-date-style",
        "every connection reads dates in the form the driver parses, whatever DateStyle the "
        "server, database or role sets",
        "catchup/postgres/database.py",
        "            _settle(conn)\n",
        "",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_every_page_answers_on_a_server_in_another_zone",
        ),
    ),
    Mutation(
        "schema-created-unasked",
        "the schema is created only when it is not there: a role that owns only its schema "
        "(no CREATE on the database) migrates",
        "catchup/ledger/base.py",
        "        if row is None or not row[0]:\n",
        "        if True:\n",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_a_role_that_owns_only_its_schema_migrates_replays_scans_and_compacts",
        ),
        also=(
            (
                "sql/queries/base.sql",
                "CREATE SCHEMA {schema};\n",
                "CREATE SCHEMA IF NOT EXISTS {schema};\n",
            ),
        ),
    ),
    Mutation(
        "held-job-claimed",
        "a held job (a rename in progress) claims nothing, whatever path reaches its claim",
        "catchup/session.py",
        "        if (old := self.held().get(job.name)) is not None:\n",
        "        if (old := self.held().get(job.name)) is not None and False:\n",
        ("tests/integration/test_rename_hold.py::test_run_of_a_held_job_claims_nothing",),
    ),
    Mutation(
        "held-job-planned",
        "tick and replay leave a held job out (one line, not a refusal a period) and run the rest",
        "catchup/api/running.py",
        "        return [j for j in jobs if j.name not in held], tuple(",
        "        return jobs, tuple(",
        (
            "tests/integration/test_rename_hold.py::test_a_tick_between_the_ledgers_rename_"
            "and_the_configs_runs_nothing_of_"
            "the_held_job",
        ),
    ),
    Mutation(
        "held-job-undetected",
        "a job new to the ledger with the schedule of one the config no longer names is held",
        "catchup/session.py",
        "        held = lookalikes(config, gone, self._fresh(names)) if gone else ()\n",
        "        held: tuple[tuple[str, str], ...] = ()\n",
        (
            "tests/integration/test_rename_hold.py::test_a_config_renamed_first_holds_"
            "until_the_ledger_follows",
            "tests/integration/test_rename_hold.py::test_the_scheduler_holds_a_job_renamed_"
            "under_it_and_keeps_leading",
        ),
    ),
    Mutation(
        "held-release-stale",
        "a job released from its hold by a rename elsewhere is claimed under the id it has now",
        "catchup/session.py",
        "            self._job_ids.clear()\n            self._timelines.clear()\n",
        "            pass\n",
        (
            "tests/integration/test_rename_hold.py::test_a_long_lived_session_runs_a_held_job_"
            "once_a_rename_elsewhere_releases_it",
        ),
    ),
    Mutation(
        "held-job-changed",
        "a held job takes no mark, reset or pause by hand until the config says which it is",
        "catchup/changes/operations.py",
        "    if (old := session.held().get(job.name)) is not None:\n",
        "    if (old := session.held().get(job.name)) is not None and False:\n",
        (
            "tests/integration/test_rename_hold.py::test_a_held_job_takes_no_change_by_hand_"
            "until_the_config_says_which_it_is",
        ),
    ),
    Mutation(
        "cancelled-run-exits-0",
        "run of a period someone cancelled exits 130: the period was not done",
        "catchup/cli/base.py",
        "    if result.status in (OutcomeStatus.interrupted, OutcomeStatus.cancelled):\n",
        "    if result.status == OutcomeStatus.interrupted:\n",
        (
            "tests/integration/test_cancel.py::test_a_cancelled_period_is_cancelled_in_why_"
            "and_a_later_failure_counts_as_the_first",
        ),
    ),
    Mutation(
        "piped-lines-padded",
        "piped output has no line ending in the spaces Rich pads it with",
        "catchup/cli/base.py",
        '        self.stream.write(re.sub(r" +\\n", "\\n", body))\n',
        "        self.stream.write(text)\n",
        ("tests/integration/test_scan_cli.py::test_piped_output_has_no_trailing_spaces",),
    ),
    Mutation(
        "keys-expected-before-start",
        "keys and the keys page expect no key before the job's start",
        "catchup/scan/keyed.py",
        "k if k.expected_from >= start else replace(k, expected_from=start)",
        "k",
        (
            "tests/integration/test_serve.py::test_the_keys_page_says_each_keys_state_and_"
            "nothing_before_the_jobs_start",
        ),
    ),
    Mutation(
        "tick-window-unsaid",
        "tick says how many gap periods lie before catchup_window (no tick runs them)",
        "catchup/replay/runs.py",
        "before_window(session, targets, now) if look_back",
        "() if look_back",
        (
            "tests/integration/test_replay.py::test_tick_says_what_max_per_tick_left_and_what_"
            "lies_before_catchup_window",
        ),
    ),
    Mutation(
        "keys-failure-stops-every-job",
        "a keyed job whose keys query fails fails alone: tick and scan go on with the others",
        "catchup/scan/keyed.py",
        "                failed[job.name] = exc\n",
        "                raise\n",
        (
            "tests/integration/test_blast_radius.py::test_a_failing_keys_query_fails_its_job_alone_and_tick_runs_the_others",
            "tests/integration/test_blast_radius.py::test_scan_reports_the_others_gaps_and_exits_3_not_1",
        ),
    ),
    Mutation(
        "keys-failure-forgets-last-keys",
        "a keyed job whose keys query fails goes on with the keys it read last",
        "catchup/scan/keyed.py",
        "selected(t.job, ledger.key_history(t.job_id) if t.job_id > 0 else [])",
        "selected(t.job, [])",
        (
            "tests/integration/test_blast_radius.py::test_the_keyed_job_goes_on_with_the_keys_it_read_last",
        ),
    ),
    Mutation(
        "keys-failure-exits-2",
        "a keys query that met a database error exits 3 (tick, scan), what it returned refused 2",
        "catchup/cli/base.py",
        "    if batch.errors or any(f.database for f in batch.keys_failed):\n",
        "    if batch.errors:\n",
        (
            "tests/integration/test_blast_radius.py::test_a_failing_keys_query_fails_its_job_alone_and_tick_runs_the_others",
            "tests/integration/test_blast_radius.py::test_scan_reports_the_others_gaps_and_exits_3_not_1",
        ),
        also=(
            (
                "catchup/cli/looking.py",
                "        f.database for f in result.keys_failed\n",
                "        False for f in result.keys_failed\n",
            ),
        ),
    ),
    Mutation(
        "keys-failure-unsaid-by-scheduler",
        "the scheduler says a keys query failed, in one line, and keeps leading",
        "catchup/api/scheduling.py",
        "                say(failure.line)\n",
        "                pass\n",
        (
            "tests/integration/test_blast_radius.py::test_the_scheduler_says_it_and_keeps_leading_and_its_page_and_metrics_show_it",
        ),
    ),
    Mutation(
        "keys-failure-no-metric",
        "/metrics has catchup_keys_read_failed 1 for a job whose keys query failed",
        "catchup/render/metrics.py",
        "        keys_failed.add_metric([job.job], int(job.keys_error is not None))\n",
        "        keys_failed.add_metric([job.job], 0)\n",
        (
            "tests/integration/test_blast_radius.py::test_the_scheduler_says_it_and_keeps_leading_and_its_page_and_metrics_show_it",
        ),
    ),
    Mutation(
        "user-sql-keeps-its-session-state",
        "a keys or evidence query that sets session state changes nothing after it",
        "catchup/ledger/evidence.py",
        "        with conn.transaction(force_rollback=True):\n",
        "        with conn.transaction():\n",
        (
            "tests/integration/test_blast_radius.py::test_a_keys_query_that_sets_session_state_changes_nothing_after_it",
            "tests/integration/test_blast_radius.py::test_an_evidence_query_that_sets_session_state_changes_nothing_after_it",
            "tests/integration/test_blast_radius.py::test_the_connection_is_as_it_was_after_a_keys_or_evidence_query",
        ),
        also=(
            (
                '            conn.execute(sqlfiles.query("evidence_discard", schema))\n',
                "            pass\n",
            ),
        ),
    ),
    Mutation(
        "user-sql-not-discarded",
        "what a rollback keeps of a keys or evidence query (an advisory lock) is discarded",
        "catchup/ledger/evidence.py",
        '            conn.execute(sqlfiles.query("evidence_discard", schema))\n',
        "            pass\n",
        (
            "tests/integration/test_blast_radius.py::test_the_connection_is_as_it_was_after_a_keys_or_evidence_query",
        ),
    ),
    Mutation(
        "user-sql-unwatched",
        "a keys query that lifts its statement timeout while it is planned is cancelled anyway",
        "catchup/ledger/evidence.py",
        "                self.conn.cancel_safe(timeout=5)\n",
        "                pass\n",
        ("tests/integration/test_blast_radius.py::test_a_keys_query_cannot_lift_its_own_timeout",),
    ),
    Mutation(
        "keys-failure-ends-the-scheduler",
        "a scheduler whose every job fails its keys query says so and keeps leading",
        "catchup/api/scheduling.py",
        "            except KeysFailed as exc:",
        "            except ZeroDivisionError as exc:",
        (
            "tests/integration/test_blast_radius.py::test_a_scheduler_whose_every_job_fails_its_keys_keeps_leading",
        ),
    ),
    Mutation(
        "serve-needs-a-writer",
        "catchup serve reads through a role that may only read (read-only by default)",
        "catchup/session.py",
        "        self.conn = db.connect(target, writes=writes)\n",
        "        self.conn = db.connect(target)\n",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_serve_reads_through_a_role_that_may_only_read",
        ),
    ),
    Mutation(
        "read-only-alerts-retried",
        "a serve whose role may only read says once that it sends no alerts, not at every scan",
        "catchup/serve/watcher.py",
        "                self._after = None\n",
        "                pass\n",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_serve_reads_through_a_role_that_may_only_read",
        ),
    ),
    Mutation(
        "ledger-under-the-roles-limits",
        "catchup's sessions carry none of the statement, lock and idle limits nor the "
        "isolation level a DBA gave the role for people's sessions",
        "sql/queries/base.sql",
        "       pg_catalog.set_config('statement_timeout', '0', false),\n",
        "",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_catchups_sessions_set_what_they_depend_on_whatever_the_role_sets",
        ),
        also=(
            (
                "       pg_catalog.set_config('default_transaction_isolation', 'read committed',"
                " false);",
                "       1;",
            ),
        ),
    ),
    Mutation(
        "transactions-in-the-roles-isolation",
        "every transaction catchup opens is read committed, whatever the role's default and "
        "through a transaction-mode pooler (a migration is never applied twice)",
        "catchup/postgres/database.py",
        "    conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED\n",
        "",
        (
            "tests/integration/test_their_postgresql.py::"
            "test_migrations_racing_through_a_transaction_pooler_apply_once",
        ),
    ),
    Mutation(
        "key-run-before-expected",
        "run of one key's period before the key was expected (or after it was gone) is "
        "refused: nothing is claimed",
        "catchup/api/running.py",
        "(why := known.unexpected(chosen.start)) is not None:\n",
        "(why := None) is not None:\n",
        (
            "tests/integration/test_key_options.py::"
            "test_a_keys_period_before_it_was_expected_is_not_expected_nor_run",
        ),
    ),
)


# One embedded server per mutation checked at once, in a home of its own, kept running from
# one mutation's tests to the next (CATCHUP_TEST_KEEP_SERVER) and stopped at the end. A pytest
# run that started the embedded server stops it when it ends: on a server shared by the checks
# running at once, one check's end cut the others' connections mid-test (a false kill, or a
# survivor whose test failed to reach the server at the step that mattered and passed after
# the next command started it again); and a check whose tests restart or stop the server must
# do it to no other check's.
HOMES: queue.Queue[Path] = queue.Queue()


def run(mutation: Mutation) -> tuple[str, str, float]:
    """(verdict, the test that failed or why not, seconds), on a server home no other check
    uses meanwhile."""
    home = HOMES.get()
    # a mutation of the embedded server's own code gets a server its copy starts, and leaves
    # none of it to the next check
    own_server = any(path.startswith("catchup/postgres/") for path, _, _ in mutation.edits())
    try:
        if own_server:
            stop_server(home)
        return run_in(mutation, home)
    finally:
        if own_server:
            stop_server(home)
        HOMES.put(home)


def run_in(mutation: Mutation, home: Path) -> tuple[str, str, float]:
    """(verdict, the test that failed or why not, seconds)."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"catchup-mutant-{mutation.name}-") as folder:
        copy = Path(folder)
        # no __pycache__: the suite, running beside the checks in CI, writes it meanwhile (a
        # .pyc's temporary file, listed then renamed away, failed the copy)
        shutil.copytree(
            ROOT / "catchup", copy / "catchup", ignore=shutil.ignore_patterns("__pycache__")
        )
        shutil.copytree(ROOT / "sql", copy / "sql")
        for path, old, new in mutation.edits():
            target = copy / path
            text = target.read_text()
            if text.count(old) != 1:
                return "did not apply", "the code it removes has changed: update it", 0.0
            target.write_text(text.replace(old, new))
        # PYTHONSAFEPATH: the working folder (the checkout) must not come before the copy
        env = {
            **os.environ,
            "PYTHONPATH": str(copy),
            "PYTHONSAFEPATH": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "CATCHUP_TEST_HOME": str(home),
            "CATCHUP_TEST_KEEP_SERVER": "1",
        }
        where = subprocess.run(
            [sys.executable, "-c", "import catchup; print(catchup.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if not where.startswith(str(copy)):
            return "did not apply", f"catchup was imported from {where}", 0.0
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *mutation.tests],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    seconds = time.monotonic() - started
    if result.returncode == 1:
        failed = [
            line.split(" ")[1] for line in result.stdout.splitlines() if line.startswith("FAILED ")
        ]
        return "killed", failed[0].split("::")[-1] if failed else "a test failed", seconds
    if result.returncode == 0:
        return "SURVIVED", "every guarding test passed", seconds
    tail = (result.stdout + result.stderr).strip().splitlines()[-1:]
    return "did not run", f"pytest exit {result.returncode}: {' '.join(tail)}", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and their tests")
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        choices=range(1, 9),
        metavar="N",
        help="mutations checked at once, each in its own copy (CI: 2, one per core)",
    )
    args = parser.parse_args()
    chosen = [m for m in MUTATIONS if not args.names or m.name in args.names]
    unknown = set(args.names) - {m.name for m in MUTATIONS}
    if unknown:
        print(f"unknown mutation(s): {', '.join(sorted(unknown))}", file=sys.stderr)
        return 2
    if args.list:
        for m in chosen:
            print(f"{m.name}: {m.invariant}\n  {m.path}\n  " + "\n  ".join(m.tests))
        return 0
    homes = [ROOT / f".catchup-test-mutants-{n}" for n in range(args.jobs)]
    for home in homes:
        HOMES.put(home)
    try:
        return check(chosen, args.jobs)
    finally:
        for home in homes:
            stop_server(home)


def stop_server(home: Path) -> None:
    """Stop the embedded server the checks kept running in ``home`` (if any): where the tests
    keep it (fix_db.reachable_place: under /var/tmp for a checkout the server cannot reach)."""
    from fix_db import reachable_place

    place = reachable_place(home.resolve())
    if not place.exists() or os.environ.get("CATCHUP_TEST_DSN"):
        return
    subprocess.run(
        [sys.executable, "-c", "from catchup.postgres import embedded; embedded.stop()"],
        env={**os.environ, "CATCHUP_HOME": str(place)},
        cwd=ROOT,
        check=False,
    )


def check(chosen: list[Mutation], jobs: int) -> int:
    """Check each chosen mutation, ``jobs`` at once; 1 when one was not killed."""
    rows = []
    # each mutation runs its tests in a process of its own on its own copy; a pool of threads
    # only waits for them (the verdicts are printed as they come, the table in order)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for mutation, (verdict, detail, seconds) in zip(chosen, pool.map(run, chosen), strict=True):
            rows.append((mutation, verdict, detail, seconds))
            print(f"{mutation.name}: {verdict} ({detail}, {seconds:.0f} s)", flush=True)
    # a mutation whose tests could not run at all (pytest's own error: its server would not
    # start, say) is checked once more, alone; a survivor is not
    for n, (mutation, verdict, detail, _) in enumerate(rows):
        if verdict == "did not run":
            verdict, detail, seconds = run(mutation)
            rows[n] = (mutation, verdict, detail, seconds)
            print(f"{mutation.name}, again alone: {verdict} ({detail}, {seconds:.0f} s)")
    print("\n| safeguard removed | invariant | verdict | killed by |")
    print("|---|---|---|---|")
    for mutation, verdict, detail, _ in rows:
        print(
            f"| `{mutation.name}` ({mutation.path}) | {mutation.invariant} | {verdict} | {detail} |"
        )
    bad = [m.name for m, verdict, _, _ in rows if verdict != "killed"]
    if bad:
        print(f"\nnot killed: {', '.join(bad)}", file=sys.stderr)
        return 1
    print(f"\nall {len(rows)} mutations killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
