"""Recipes for the built-in scheduler (``deploy kubernetes --scheduler``, ``deploy systemd
--scheduler``): ``catchup scheduler`` as a long-running service on every replica, one of them
leading, instead of a CronJob or a timer that calls ``catchup tick``. Values are quoted as in
:mod:`catchup.deploy.tick` and :mod:`catchup.deploy.systemd`."""

from __future__ import annotations

import json

from .fill import render_template

# seconds after the scheduler's grace before the pod (or the unit) is killed: its own stop
# (the lease handed back, what ran past the grace recorded interrupted) takes a moment
STOP_MARGIN = 15
SERVE_PORT = 9187  # where every recipe's page listens (catchup serve's default)


def kubernetes_scheduler(
    *, name: str, meta: str, image: str, secret: str, config_map: str, grace: int, setup: str
) -> str:
    """A Deployment of two replicas each running ``catchup scheduler --serve`` (one leads), a
    PodDisruptionBudget that keeps one up through a node drain, and a Service in front of the
    pages with Prometheus's scrape annotations."""
    deployment = _deployment(name, meta, image, secret, config_map, grace, setup)
    return deployment + _budget_and_service(name, meta)


# Prometheus's scrape annotations, on the Service and (indented) on the pods
SCRAPE = (
    '    prometheus.io/scrape: "true"\n'
    f'    prometheus.io/port: "{SERVE_PORT}"\n'
    '    prometheus.io/path: "/metrics"'
)


def _labels(name: str) -> tuple[str, str]:
    """The app label's value (JSON, which YAML reads as a plain string) and the labels block."""
    app = json.dumps(name)
    return app, f"  labels:\n    app: {app}\n"


def _deployment(
    name: str, meta: str, image: str, secret: str, config_map: str, grace: int, setup: str
) -> str:
    """The Deployment of two ``catchup scheduler --serve`` replicas (one leads)."""
    app, labels = _labels(name)
    pod_scrape = "\n".join("    " + line for line in SCRAPE.splitlines())
    serving = ["--serve", f"0.0.0.0:{SERVE_PORT}", "--grace", f"{grace}s"]
    args = json.dumps(["catchup", "-q", "scheduler", *serving])
    return render_template(
        "scheduler.yaml",
        port=SERVE_PORT,
        app=app,
        args=args,
        termination_grace=grace + STOP_MARGIN,
        grace=grace,
        config_map=json.dumps(config_map),
        image=json.dumps(image),
        secret=json.dumps(secret),
        labels=labels,
        meta=meta,
        pod_scrape=pod_scrape,
        setup=setup,
    )


def _budget_and_service(name: str, meta: str) -> str:
    """The PodDisruptionBudget that keeps one replica up through a drain, and the Service in
    front of the pages with Prometheus's scrape annotations."""
    app, labels = _labels(name)
    scrape = SCRAPE
    return f"""\
---
# A node drain or a cluster upgrade takes at most one replica at a time: one is always there
# to lead.
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
{meta}{labels}spec:
  minAvailable: 1
  selector:
    matchLabels:
      app: {app}
---
apiVersion: v1
kind: Service
metadata:
{meta}{labels}  annotations:
{scrape}
spec:
  selector:
    app: {app}
  ports:
    - name: http
      port: {SERVE_PORT}
      targetPort: http
"""


def systemd_scheduler(
    *, executable: str, workdir: str, who: str, name: str, grace: int, sandbox: str
) -> str:
    """A long-running service running ``catchup scheduler`` (on every host that should be
    able to lead), restarted on failure, reloaded with ``systemctl reload``."""
    return f"""\
[Unit]
Description=catchup scheduler: one host of several leads and starts each period as it falls due
Wants=network-online.target
After=network-online.target

[Service]
Type=exec
ExecStart={executable} -q scheduler --grace {grace}s --serve 127.0.0.1:{SERVE_PORT}
# systemctl reload: catchup.toml is read again (it is also when it changes on disk); a
# version that does not load is refused, the last good one kept, and the journal says so
ExecReload=/bin/kill -HUP $MAINPID
# CATCHUP_DSN=… (and CATCHUP_CONFIG) go here, readable by root only
EnvironmentFile=-/etc/catchup/env
# a missing DSN is an error, never a database on this host
Environment=CATCHUP_EMBEDDED=never
WorkingDirectory={workdir}
{who}StateDirectory={name}
Restart=on-failure
RestartSec=5
# SIGTERM to catchup alone: it hands the lead back and lets what runs finish for up to
# --grace; then the rest of the group (a job that outlived it) is killed
KillMode=mixed
TimeoutStopSec={grace + STOP_MARGIN}
{sandbox}
[Install]
WantedBy=multi-user.target
"""
