"""The deploy recipes parse (YAML, systemd) and carry the settings that make one scheduler safe."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from catchup.cli import cli


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_kubernetes_cronjob() -> None:
    text = invoke(
        "deploy",
        "kubernetes",
        "--image",
        "ghcr.io/acme/app:1.4",
        "--namespace",
        "billing",
        "--every",
        "10",
    )
    doc = yaml.safe_load(text)
    assert doc["kind"] == "CronJob" and doc["apiVersion"] == "batch/v1"
    spec = doc["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["timeZone"] == "Etc/UTC"
    assert 0 < spec["startingDeadlineSeconds"] < 600
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    minute = spec["schedule"].split()[0]
    assert minute == "3-59/10"  # never on the hour
    container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/acme/app:1.4"
    assert container["args"] == ["catchup", "-q", "tick"]
    dsn = next(e for e in container["env"] if e["name"] == "CATCHUP_DSN")
    assert dsn["valueFrom"]["secretKeyRef"] == {"name": "catchup-db", "key": "dsn"}
    assert doc["metadata"]["namespace"] == "billing"


def test_hostile_values_stay_values() -> None:
    text = invoke("deploy", "kubernetes", "--image", 'x"\n  evil: true', "--name", "nightly-1")
    doc = yaml.safe_load(text)
    assert "evil" not in doc["spec"]
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == 'x"\n  evil: true'
    assert doc["metadata"]["name"] == "nightly-1"


@pytest.mark.parametrize(
    "args",
    [
        ["kubernetes", "--name", "Bad Name!"],
        ["kubernetes", "--name", "a: b"],
        ["kubernetes", "--name", "x" * 53],
        ["kubernetes", "--namespace", "Billing Team"],
        ["systemd", "--name", "../escaped"],
        ["systemd", "--name", "a/b"],
    ],
)
def test_names_that_are_not_names_are_refused(tmp_path: Path, args: list[str]) -> None:
    """A name Kubernetes or systemd would refuse, or one that leaves the output folder, is a
    usage error (exit 2, one line) and nothing is written."""
    out = tmp_path / "out"
    extra = ["--output-dir", str(out)] if args[0] == "systemd" else []
    result = CliRunner().invoke(cli, ["deploy", *args, *extra])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_recipes_refuse_the_embedded_fallback() -> None:
    """Production recipes set CATCHUP_EMBEDDED=never: a missing DSN fails, never starts a
    database inside the pod or on the host."""
    doc = yaml.safe_load(invoke("deploy", "kubernetes"))
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "CATCHUP_EMBEDDED", "value": "never"} in container["env"]
    assert "\nEnvironment=CATCHUP_EMBEDDED=never\n" in invoke("deploy", "systemd")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_units_verify(tmp_path: Path) -> None:
    executable = str(Path(sys.executable).with_name("catchup"))
    invoke("deploy", "systemd", "--exec", executable, "--output-dir", str(tmp_path))
    service, timer = tmp_path / "catchup.service", tmp_path / "catchup.timer"
    assert "ExecStart=" + executable + " -q tick" in service.read_text()
    body = timer.read_text()
    assert "Persistent=true" in body and "RandomizedDelaySec=" in body
    assert "OnCalendar=*:03/5" in body
    check = subprocess.run(
        ["systemd-analyze", "verify", str(service), str(timer)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    # the check can fail: a broken timer is caught
    timer.write_text(body.replace("OnCalendar=*:03/5", "OnCalendar=every so often"))
    broken = subprocess.run(
        ["systemd-analyze", "verify", str(service), str(timer)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert broken.returncode != 0 or "Failed to parse" in broken.stderr


def test_systemd_printed() -> None:
    text = invoke("deploy", "systemd")
    assert "# --- catchup.service" in text and "# --- catchup.timer" in text
    assert "[Timer]" in text and "WantedBy=timers.target" in text


def test_kubernetes_serve_part() -> None:
    """--serve adds a Deployment running `catchup serve` and a Service, both with Prometheus's
    scrape annotations, probes on /readyz and /healthz, and the same DSN and config."""
    text = invoke("deploy", "kubernetes", "--serve", "--name", "nightly", "--namespace", "ops")
    cronjob, deployment, service = yaml.safe_load_all(text)
    assert [cronjob["kind"], deployment["kind"], service["kind"]] == [
        "CronJob",
        "Deployment",
        "Service",
    ]
    assert deployment["metadata"] == {
        "name": "nightly-serve",
        "namespace": "ops",
        "labels": {"app": "nightly-serve"},
    }
    pod = deployment["spec"]["template"]
    scrape = {"prometheus.io/scrape": "true", "prometheus.io/port": "9187"}
    assert scrape.items() <= pod["metadata"]["annotations"].items()
    assert scrape.items() <= service["metadata"]["annotations"].items()
    assert deployment["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    assert service["spec"]["selector"] == pod["metadata"]["labels"]
    (container,) = pod["spec"]["containers"]
    assert container["args"][:3] == ["catchup", "-q", "serve"]
    assert container["args"][3:5] == ["--listen", "0.0.0.0:9187"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    env = {e["name"]: e for e in container["env"]}
    assert env["CATCHUP_EMBEDDED"]["value"] == "never"
    assert env["CATCHUP_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "catchup-db"
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    # without --serve, the CronJob alone
    assert [d["kind"] for d in yaml.safe_load_all(invoke("deploy", "kubernetes"))] == ["CronJob"]


def test_systemd_serve_unit_verifies(tmp_path: Path) -> None:
    executable = str(Path(sys.executable).with_name("catchup"))
    invoke("deploy", "systemd", "--serve", "--exec", executable, "--output-dir", str(tmp_path))
    unit = tmp_path / "catchup-serve.service"
    body = unit.read_text()
    assert f"ExecStart={executable} -q serve --listen 127.0.0.1:9187" in body
    assert "Type=simple" in body and "Restart=on-failure" in body
    assert "Environment=CATCHUP_EMBEDDED=never" in body
    check = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
