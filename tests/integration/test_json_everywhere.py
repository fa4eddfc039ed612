"""`--json` on every command that returns a result (issue 50): mark, reset, adopt, pause,
resume, rename, retire, migrate, explain and doctor print one JSON document on stdout that
says what the lines say, for scripts, with the same exit codes."""

from __future__ import annotations

import json
from typing import Any

from fix_project import Project, job_toml


def as_json(project: Project, *args: str) -> Any:
    result = project.cli("-q", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_the_changes_by_hand_print_json(project: Project, sql: Any) -> None:
    project.write(job_toml("billing", command=["true"]))
    migrated = as_json(project, "migrate")
    assert migrated["schema"] == project.schema and migrated["version"] >= 24
    assert as_json(project, "migrate")["applied"] == []
    sql("CREATE TABLE {schema}.exports (day date)")
    sql("INSERT INTO {schema}.exports VALUES ('2026-10-01')")
    evidence = f"SELECT day FROM {project.schema}.exports"
    project.write(job_toml("billing", command=["true"], evidence=evidence))

    adopted = as_json(project, "adopt", "billing", "--until", "2026-10-03", "--reason", "cron")
    (job,) = adopted["jobs"]
    assert (job["job"], job["action"], job["changed"]) == ("billing", "adopt", 1)
    assert [(p["label"], p["previous"], p["now"]) for p in job["periods"] if p["changed"]] == [
        ("2026-10-01", "missing", "waived")
    ]

    marked = as_json(
        project, "mark", "billing", "2026-10-02..2026-10-03", "--skip", "--reason", "x"
    )
    assert (marked["action"], marked["changed"]) == ("skip", 2)
    first = marked["periods"][0]
    assert (first["start"], first["end"]) == ("2026-10-02T00:00:00Z", "2026-10-03T00:00:00Z")
    assert (first["previous"], first["now"], first["changed"]) == ("missing", "waived", True)

    reset = as_json(project, "reset", "billing", "2026-10-02", "--reason", "again")
    assert (reset["action"], reset["changed"], reset["periods"][0]["now"]) == (
        "reset",
        1,
        "failed",
    )

    paused = as_json(project, "pause", "billing", "--reason", "maintenance")
    assert paused["job"] == "billing" and paused["paused"] is True
    assert paused["since"].endswith("Z")
    resumed = as_json(project, "resume", "billing")
    assert resumed["resumed"] is True and resumed["catchup"] in ("all", "latest", "none")

    project.write(job_toml("invoices", command=["true"], evidence=evidence))
    renamed = as_json(project, "rename", "billing", "invoices", "--reason", "one name")
    assert renamed == {"old": "billing", "new": "invoices", "config_behind": False}
    project.write(job_toml("other", command=["true"]))
    retired = as_json(project, "retire", "invoices", "--reason", "gone")
    assert retired == {"job": "invoices", "retired": True}


def test_explain_and_doctor_print_json(project: Project) -> None:
    project.write(job_toml("billing", timezone="Europe/Paris", command=["true"]))
    explained = as_json(project, "explain", "billing", "--since", "2026-10-24", "--limit", "3")
    assert (explained["job"], explained["timezone"]) == ("billing", "Europe/Paris")
    labels = [p["label"] for p in explained["periods"]]
    assert labels == ["2026-10-24", "2026-10-25", "2026-10-26"]
    # the night the clocks go back: a 25-hour local day
    assert explained["periods"][1]["dst"] and not explained["periods"][0]["dst"]
    assert explained["periods"][1]["local_start"] == "2026-10-25T00:00:00+02:00"

    doctor = project.cli("-q", "doctor", "--json")
    found = json.loads(doctor.stdout)
    assert found["findings"] and {"level", "topic", "text"} <= set(found["findings"][0])
    assert doctor.exit_code == (1 if found["serious"] else 0)
