"""The deploy recipes parse (YAML, systemd) and carry the settings that make one scheduler safe."""

from __future__ import annotations

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
    assert spec["concurrencyPolicy"] == "Allow"
    assert spec["timeZone"] == "Etc/UTC"
    assert 0 < spec["startingDeadlineSeconds"] < 600
    assert spec["successfulJobsHistoryLimit"] >= 1 and spec["failedJobsHistoryLimit"] >= 1
    minute = spec["schedule"].split()[0]
    assert minute == "3-59/10"  # never on the hour
    container = spec["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "ghcr.io/acme/app:1.4"
    assert container["command"] == ["catchup", "-q", "tick", "--max-time", "10m"]
    dsn = next(e for e in container["env"] if e["name"] == "CATCHUP_DSN")
    assert dsn["valueFrom"]["secretKeyRef"] == {"name": "catchup-db", "key": "dsn"}
    assert doc["metadata"]["namespace"] == "billing"


def test_hostile_values_stay_values() -> None:
    text = invoke("deploy", "kubernetes", "--image", 'x"evil:true', "--name", "nightly-1")
    doc = yaml.safe_load(text)
    assert "evil" not in doc["spec"]
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == 'x"evil:true'
    assert doc["metadata"]["name"] == "nightly-1"
    refused = CliRunner().invoke(cli, ["deploy", "kubernetes", "--image", 'x"\n  evil: true'])
    assert refused.exit_code == 2 and "control characters" in refused.stderr


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
    if args[0] == "systemd":
        out.mkdir()
    image = ["--image", "app:1"] if args[0] == "kubernetes" else []
    result = CliRunner().invoke(cli, ["deploy", *args, *extra, *image])
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    assert not out.exists() or list(out.iterdir()) == []


def test_recipes_refuse_the_embedded_fallback() -> None:
    """Production recipes set CATCHUP_EMBEDDED=never: a missing DSN fails, never starts a
    database inside the pod or on the host."""
    doc = yaml.safe_load(invoke("deploy", "kubernetes", "--image", "app:1"))
    container = doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "CATCHUP_EMBEDDED", "value": "never"} in container["env"]
    assert "\nEnvironment=CATCHUP_EMBEDDED=never\n" in invoke("deploy", "systemd")


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
    text = invoke(
        "deploy",
        "kubernetes",
        "--image",
        "app:1",
        "--serve",
        "--name",
        "nightly",
        "--namespace",
        "ops",
    )
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
    alone = invoke("deploy", "kubernetes", "--image", "app:1")
    assert [d["kind"] for d in yaml.safe_load_all(alone)] == ["CronJob"]


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


@pytest.mark.parametrize("version", ["1.33.0"])
def test_the_kubernetes_recipe_is_valid_for_kubernetes(version: str) -> None:
    """The CronJob, Deployment and Service as printed, checked against Kubernetes' own
    schemas (kubernetes-validate, strict: no field Kubernetes does not know)."""
    import kubernetes_validate

    text = invoke("deploy", "kubernetes", "--image", "ghcr.io/acme/app:1.4", "--serve")
    documents = list(yaml.safe_load_all(text))
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    spec = documents[0]["spec"]
    assert spec["concurrencyPolicy"] == "Allow"  # the ledger makes concurrent ticks safe
    job = spec["jobTemplate"]["spec"]
    assert job["activeDeadlineSeconds"] == 6 * 3600
    pod = job["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert "memory" in container["resources"]["limits"]
    assert "kubectl create secret generic catchup-db" in text
    assert "kubectl create configmap catchup-config --from-file=catchup.toml" in text
    # the check can fail: a field Kubernetes does not know is caught
    container["imagePullPolicyy"] = "Always"  # a typo of a field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(documents[0], version, strict=True)


@pytest.mark.parametrize("every", ["7", "45", "25"])
def test_ticks_that_would_not_come_evenly_are_refused(every: str, tmp_path: Path) -> None:
    """`--every 45` gave `3-59/45` (ticks 15 and 45 minutes apart), `--every 7` four minutes
    apart at each hour."""
    for kind in (["kubernetes", "--image", "app:1"], ["systemd"]):
        result = CliRunner().invoke(cli, ["deploy", *kind, "--every", every])
        assert result.exit_code == 2, result.output
        assert "ticks come evenly only every divisor of 60 minutes" in result.stderr


def test_hourly_ticks_are_one_minute_each_hour() -> None:
    doc = yaml.safe_load(invoke("deploy", "kubernetes", "--image", "app:1", "--every", "60"))
    assert doc["spec"]["schedule"] == "3 * * * *"
    assert "OnCalendar=*:03\n" in invoke("deploy", "systemd", "--every", "60")


def test_an_output_dir_must_exist_and_units_are_replaced_only_when_asked(
    tmp_path: Path,
) -> None:
    missing = CliRunner().invoke(cli, ["deploy", "systemd", "--output-dir", str(tmp_path / "x")])
    assert missing.exit_code == 2 and "no such folder" in missing.stderr
    assert not (tmp_path / "x").exists()
    invoke("deploy", "systemd", "--output-dir", str(tmp_path))
    (tmp_path / "catchup.service").write_text("# edited by hand\n")
    again = CliRunner().invoke(cli, ["deploy", "systemd", "--output-dir", str(tmp_path)])
    assert again.exit_code == 2 and "already there (--force replaces them)" in again.stderr
    assert (tmp_path / "catchup.service").read_text() == "# edited by hand\n"
    invoke("deploy", "systemd", "--output-dir", str(tmp_path), "--force")
    assert "ExecStart=" in (tmp_path / "catchup.service").read_text()


def test_the_systemd_units_are_sandboxed_and_run_as_a_user_that_exists(tmp_path: Path) -> None:
    """DynamicUser (or a named user with the sysusers.d file that makes it), a start deadline,
    and a sandbox that systemd-analyze security rates OK."""
    import re

    executable = str(Path(sys.executable).with_name("catchup"))
    invoke("deploy", "systemd", "--exec", executable, "--serve", "--output-dir", str(tmp_path))
    service = (tmp_path / "catchup.service").read_text()
    assert "DynamicUser=yes" in service and "TimeoutStartSec=21600" in service
    assert "--max-time 5m" in service and "ProtectSystem=strict" in service
    for unit in ("catchup.service", "catchup-serve.service"):
        rated = subprocess.run(
            ["systemd-analyze", "security", "--offline=true", str(tmp_path / unit)],
            capture_output=True,
            text=True,
            check=False,
        )
        found = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", rated.stdout)
        assert found is not None, rated.stdout + rated.stderr
        assert float(found.group(1)) <= 2.0 and found.group(2) == "OK", found.group(0)
    named = tmp_path / "named"
    named.mkdir()
    invoke("deploy", "systemd", "--user", "billing", "--output-dir", str(named))
    assert "User=billing" in (named / "catchup.service").read_text()
    assert (named / "catchup-sysusers.conf").read_text().startswith("u billing - ")


def test_kubernetes_scheduler_recipe_is_valid_and_fits_the_grace() -> None:
    """--scheduler: a Deployment of 2 `catchup scheduler --serve` replicas (rolling update that
    starts the new pod first), a PodDisruptionBudget keeping one, a Service for the pages;
    terminationGracePeriodSeconds covers --grace; valid for Kubernetes (strict)."""
    import kubernetes_validate

    text = invoke(
        "deploy", "kubernetes", "--image", "app:1", "--scheduler", "--grace", "60s",
        "--namespace", "ops",
    )  # fmt: skip
    documents = list(yaml.safe_load_all(text))
    assert [d["kind"] for d in documents] == ["Deployment", "PodDisruptionBudget", "Service"]
    for document in documents:
        kubernetes_validate.validate(document, "1.33.0", strict=True)
        assert document["metadata"]["namespace"] == "ops"
    deployment, budget, service = documents
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    pod = spec["template"]
    labels = pod["metadata"]["labels"]
    assert spec["selector"]["matchLabels"] == labels == budget["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["minAvailable"] == 1 and service["spec"]["selector"] == labels
    assert pod["spec"]["terminationGracePeriodSeconds"] == 60 + 15
    (container,) = pod["spec"]["containers"]
    assert container["command"] == [
        "catchup", "-q", "scheduler", "--serve", "0.0.0.0:9187", "--grace", "60s",
    ]  # fmt: skip
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    env = {e["name"]: e for e in container["env"]}
    assert env["CATCHUP_EMBEDDED"]["value"] == "never"
    assert env["CATCHUP_DSN"]["valueFrom"]["secretKeyRef"]["name"] == "catchup-db"
    assert container["volumeMounts"][0]["mountPath"] == "/etc/catchup"  # no subPath: reloads
    assert "subPath" not in container["volumeMounts"][0]
    assert "kubectl create secret generic catchup-db --namespace ops" in text
    assert "CronJob" not in [d["kind"] for d in documents]
    refused = CliRunner().invoke(
        cli, ["deploy", "kubernetes", "--image", "app:1", "--scheduler", "--grace", "2h"]
    )
    assert refused.exit_code == 2 and "--grace" in refused.stderr


def test_systemd_scheduler_unit_verifies_and_is_sandboxed(tmp_path: Path) -> None:
    """--scheduler: one long-running service (no timer), restarted on failure, reloaded by
    SIGHUP, SIGTERM to catchup alone with a stop timeout that covers --grace."""
    import re

    executable = str(Path(sys.executable).with_name("catchup"))
    invoke(
        "deploy", "systemd", "--scheduler", "--exec", executable, "--output-dir", str(tmp_path),
    )  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catchup-scheduler.service"]
    unit = tmp_path / "catchup-scheduler.service"
    body = unit.read_text()
    assert f"ExecStart={executable} -q scheduler --grace 30s --serve 127.0.0.1:9187\n" in body
    for line in ("Type=exec", "Restart=on-failure", "ExecReload=/bin/kill -HUP $MAINPID",
                 "KillMode=mixed", "TimeoutStopSec=45", "Environment=CATCHUP_EMBEDDED=never",
                 "WantedBy=multi-user.target"):  # fmt: skip
        assert f"{line}\n" in body, line
    check = subprocess.run(
        ["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stderr
    rated = subprocess.run(
        ["systemd-analyze", "security", "--offline=true", str(unit)],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r"Overall exposure level for \S+: ([\d.]+) (\w+)", rated.stdout)
    assert found is not None, rated.stdout + rated.stderr
    assert float(found.group(1)) <= 2.0 and found.group(2) == "OK", found.group(0)
