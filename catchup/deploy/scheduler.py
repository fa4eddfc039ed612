"""Recipes for the built-in scheduler (``deploy kubernetes --scheduler``, ``deploy systemd
--scheduler``): ``catchup scheduler`` as a long-running service on every replica, one of them
leading, instead of a CronJob or a timer that calls ``catchup tick``. Values are quoted as in
:mod:`catchup.deploy.tick` and :mod:`catchup.deploy.systemd`."""

from __future__ import annotations

import json

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
    app = json.dumps(name)
    labels = f"  labels:\n    app: {app}\n"
    scrape = (
        '    prometheus.io/scrape: "true"\n'
        f'    prometheus.io/port: "{SERVE_PORT}"\n'
        '    prometheus.io/path: "/metrics"'
    )
    pod_scrape = "\n".join("    " + line for line in scrape.splitlines())
    args = json.dumps(
        [
            "catchup",
            "-q",
            "scheduler",
            "--serve",
            f"0.0.0.0:{SERVE_PORT}",
            "--grace",
            f"{grace}s",
        ]
    )
    return f"""\
# `catchup scheduler` on 2 replicas: one leads (a lease in the ledger, on the database clock),
# starts each period as it falls due, and the other takes over within the lease (15 s) plus a
# second if it dies. A rolling update starts the new pod first (maxUnavailable 0); the old one,
# on SIGTERM, hands the lead back at once and lets what runs finish for up to --grace
# ({grace} s), within terminationGracePeriodSeconds. Each pod also serves the status page,
# /metrics, /healthz and /readyz on port {SERVE_PORT}; catchup.toml is read again when the
# ConfigMap changes (a version that does not load is refused and /readyz says so).
# First the Secret with the DSN and the ConfigMap with catchup.toml:
{setup}# Then remove any CronJob or timer that calls `catchup tick`: the pulse warns while one does.
apiVersion: apps/v1
kind: Deployment
metadata:
{meta}{labels}spec:
  replicas: 2
  selector:
    matchLabels:
      app: {app}
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 0
      maxSurge: 1
  template:
    metadata:
      labels:
        app: {app}
      annotations:
{pod_scrape}
    spec:
      terminationGracePeriodSeconds: {grace + STOP_MARGIN}
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        seccompProfile:
          type: RuntimeDefault
      # the replicas on different nodes where there are several: one node's loss is a failover
      topologySpreadConstraints:
        - maxSkew: 1
          topologyKey: kubernetes.io/hostname
          whenUnsatisfiable: ScheduleAnyway
          labelSelector:
            matchLabels:
              app: {app}
      containers:
        - name: catchup
          image: {json.dumps(image)}
          command: {args}
          ports:
            - name: http
              containerPort: {SERVE_PORT}
          # alive while its scanning thread runs; ready while its scan succeeds and its config
          # loads (never restarted for a bad config: a restart would not load it either)
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 20
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 20
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
          # catchup itself needs little; size these for the jobs the leader runs
          resources:
            requests:
              cpu: "100m"
              memory: "128Mi"
            limits:
              memory: "1Gi"
          env:
            - name: CATCHUP_DSN
              valueFrom:
                secretKeyRef:
                  name: {json.dumps(secret)}
                  key: dsn
            - name: CATCHUP_CONFIG
              value: "/etc/catchup/catchup.toml"
            # a missing DSN is an error, never a database inside the pod
            - name: CATCHUP_EMBEDDED
              value: "never"
          volumeMounts:
            # the whole folder, not a subPath: a subPath mount never sees the ConfigMap change
            - name: config
              mountPath: /etc/catchup
              readOnly: true
            - name: tmp
              mountPath: /tmp
      volumes:
        - name: config
          configMap:
            name: {json.dumps(config_map)}
        - name: tmp
          emptyDir: {{}}
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
