"""Recipes for the one scheduler that calls ``catchup tick``: a Kubernetes CronJob, or a
systemd service and timer. Values are quoted as JSON strings, which YAML and systemd read as
plain text; nothing the user types becomes structure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from .errors import ConfigError

# A CronJob's name is a DNS-1123 subdomain, at most 52 characters (its Jobs add 11); a systemd
# unit's name is letters, digits and ":_.-" (no "/", so the files stay in the output folder).
_KUBERNETES_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,50}[a-z0-9])?")
_SYSTEMD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9:_.-]{0,99}")


def check_name(kind: str, name: str) -> None:
    """A usage error unless ``name`` is valid for ``kind`` (kubernetes or systemd)."""
    if kind == "kubernetes" and not _KUBERNETES_NAME.fullmatch(name):
        raise ConfigError(
            f"--name {name[:60]!r}: a Kubernetes name is lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, at most 52 characters"
        )
    if kind == "systemd" and not _SYSTEMD_NAME.fullmatch(name):
        raise ConfigError(
            f"--name {name[:60]!r}: a systemd unit name is letters, digits and ':_.-', "
            "starting with a letter, digit or '_', at most 100 characters"
        )


@dataclass(frozen=True)
class Recipe:
    """Files to install: name → content."""

    files: dict[str, str]

    def text(self) -> str:
        """Every file, each under a comment naming it; YAML files as one stream of documents
        (``kubectl apply -f -`` reads them all)."""
        parts = []
        for n, (name, body) in enumerate(self.files.items()):
            separator = "---\n" if n and name.endswith(".yaml") else ""
            parts.append(f"{separator}# --- {name}\n{body}")
        return "\n".join(parts)


SERVE_PORT = 9187


EVEN_EVERY = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)


def check_every(every: int) -> None:
    """Ticks come evenly only every divisor of 60 minutes: `*/45` runs at :00 and :45, 15 and
    45 minutes apart, and `3-59/7` four minutes apart at each hour."""
    if every not in EVEN_EVERY:
        shown = ", ".join(str(n) for n in EVEN_EVERY[:-1]) + f" or {EVEN_EVERY[-1]}"
        raise ConfigError(
            f"--every {every}: ticks come evenly only every divisor of 60 minutes ({shown})"
        )


def minutes(every: int, offset: int) -> str:
    """Cron minutes: every ``every`` minutes starting at ``offset``, so never on the hour."""
    if every >= 60:
        return str(offset)
    return f"{offset}-59/{every}" if every > 1 else "*"


def offset_for(every: int) -> int:
    return min(3, every - 1) if every > 1 else 0


def kubernetes(
    *,
    name: str,
    image: str,
    every: int,
    secret: str,
    config_map: str,
    namespace: str | None,
    serve: bool = False,
    deadline: int = 6 * 3600,
) -> Recipe:
    check_name("kubernetes", name)
    check_every(every)
    if namespace is not None and not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", namespace):
        raise ConfigError(f"--namespace {namespace[:70]!r}: not a Kubernetes namespace name")
    if not image.strip() or any(ord(c) < 0x21 for c in image):
        raise ConfigError("--image: an image reference, with no spaces or control characters")
    offset = offset_for(every)
    meta = f"  name: {json.dumps(name)}\n"
    if namespace:
        meta += f"  namespace: {json.dumps(namespace)}\n"
    ns = f" --namespace {namespace}" if namespace else ""
    body = f"""\
# `catchup tick` every {every} minute(s), {offset} minute(s) off the hour; apply: kubectl apply -f -
# First the Secret with the DSN and the ConfigMap with catchup.toml:
#   kubectl create secret generic {secret}{ns} --from-literal=dsn='postgresql://…'
#   kubectl create configmap {config_map}{ns} --from-file=catchup.toml
# concurrencyPolicy Allow: two ticks at once are safe (each period is claimed once, in the
# ledger), and a tick that still runs a slow period never holds the next one back; each tick
# starts nothing new after --max-time (its interval), so ticks never pile up behind a backlog.
# activeDeadlineSeconds is a last resort for a hung job without a timeout: make it longer
# than your longest job's timeout (a killed job's lease runs out, and it is retried). Jobs run
# in the config's folder, /etc/catchup (read-only): set workdir in catchup.toml to where they
# live in the image.
apiVersion: batch/v1
kind: CronJob
metadata:
{meta}spec:
  schedule: "{minutes(every, offset)} * * * *"
  timeZone: "Etc/UTC"
  concurrencyPolicy: Allow
  startingDeadlineSeconds: {max(30, min(240, every * 60 - 30))}
  successfulJobsHistoryLimit: 3
  failedJobsHistoryLimit: 5
  jobTemplate:
    spec:
      backoffLimit: 0
      activeDeadlineSeconds: {deadline}
      ttlSecondsAfterFinished: 86400
      template:
        spec:
          restartPolicy: Never
          terminationGracePeriodSeconds: 60
          securityContext:
            runAsNonRoot: true
            runAsUser: 65532
            runAsGroup: 65532
            seccompProfile:
              type: RuntimeDefault
          containers:
            - name: catchup
              image: {json.dumps(image)}
              command: ["catchup", "-q", "tick", "--max-time", "{every}m"]
              securityContext:
                allowPrivilegeEscalation: false
                readOnlyRootFilesystem: true
                capabilities:
                  drop: ["ALL"]
              # catchup itself needs little; size these for the jobs it runs
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
"""
    files = {f"{name}-cronjob.yaml": body}
    if serve:
        files[f"{name}-serve.yaml"] = _kubernetes_serve(name, meta, image, secret, config_map)
    return Recipe(files)


def _kubernetes_serve(name: str, meta: str, image: str, secret: str, config_map: str) -> str:
    """A Deployment running `catchup serve` (read-only, so any number of replicas is safe) and
    a Service in front of it, with Prometheus's scrape annotations on both."""
    app = json.dumps(f"{name}-serve")
    meta = meta.replace(f"  name: {json.dumps(name)}\n", f"  name: {app}\n")
    scrape = (
        '    prometheus.io/scrape: "true"\n'
        f'    prometheus.io/port: "{SERVE_PORT}"\n'
        '    prometheus.io/path: "/metrics"'
    )
    pod_scrape = "\n".join("    " + line for line in scrape.splitlines())
    return f"""\
# `catchup serve`: the status page, /metrics, /api/scan, /healthz, /readyz on port {SERVE_PORT};
# read-only towards the ledger. Same Secret and ConfigMap as the CronJob.
apiVersion: apps/v1
kind: Deployment
metadata:
{meta}  labels:
    app: {app}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: {app}
  template:
    metadata:
      labels:
        app: {app}
      annotations:
{pod_scrape}
    spec:
      containers:
        - name: catchup-serve
          image: {json.dumps(image)}
          args: ["catchup", "-q", "serve", "--listen", "0.0.0.0:{SERVE_PORT}", "--refresh", "60s"]
          ports:
            - name: http
              containerPort: {SERVE_PORT}
          readinessProbe:
            httpGet:
              path: /readyz
              port: http
            periodSeconds: 30
          livenessProbe:
            httpGet:
              path: /healthz
              port: http
            periodSeconds: 30
          env:
            - name: CATCHUP_DSN
              valueFrom:
                secretKeyRef:
                  name: {json.dumps(secret)}
                  key: dsn
            - name: CATCHUP_CONFIG
              value: "/etc/catchup/catchup.toml"
            - name: CATCHUP_EMBEDDED
              value: "never"
          volumeMounts:
            - name: config
              mountPath: /etc/catchup
              readOnly: true
      volumes:
        - name: config
          configMap:
            name: {json.dumps(config_map)}
---
apiVersion: v1
kind: Service
metadata:
{meta}  annotations:
{scrape}
spec:
  selector:
    app: {app}
  ports:
    - name: http
      port: {SERVE_PORT}
      targetPort: http
"""


# A user name as useradd takes it (or a numeric uid): nothing else can reach the unit's User=.
_UNIX_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}|[0-9]{1,10}")


def _unit_value(option: str, value: str) -> str:
    """A value for a unit file: refused if it holds a control character (a newline would start
    a line of the unit's own, ``ExecStartPre=`` or ``Environment=LD_PRELOAD=``); systemd's
    ``%`` specifiers written as ``%%`` so they stay text."""
    bad = next((c for c in value if ord(c) < 0x20 or ord(c) == 0x7F), None)
    if bad is not None:
        raise ConfigError(f"{option}: holds a control character ({bad!a}); a unit file has none")
    return value.replace("%", "%%")


# The sandbox of every unit: systemd-analyze security rates it (README: its score). It leaves
# what jobs commonly need (no MemoryDenyWriteExecute: a JIT such as Node's or Java's needs it;
# any system-service call). A job that writes outside its StateDirectory (/var/lib/NAME) needs
# ReadWritePaths= in a drop-in.
SANDBOX = """\
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
PrivateTmp=yes
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
ProtectProc=invisible
RestrictSUIDSGID=yes
RestrictNamespaces=yes
RestrictRealtime=yes
LockPersonality=yes
CapabilityBoundingSet=
AmbientCapabilities=
SystemCallArchitectures=native
SystemCallFilter=@system-service
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
UMask=0077
"""


def systemd(
    *,
    name: str,
    executable: str,
    every: int,
    user: str | None,
    workdir: str,
    serve: bool = False,
    deadline: int = 6 * 3600,
) -> Recipe:
    check_name("systemd", name)
    check_every(every)
    if user is not None and not _UNIX_USER.fullmatch(user):
        raise ConfigError(
            f"--user {user[:40]!a}: a user name is lower-case letters, digits, '_' and '-' "
            "(at most 32), or a numeric uid"
        )
    if not workdir.startswith("/"):
        raise ConfigError(f"--workdir {workdir[:60]!a}: must be an absolute path")
    workdir = _unit_value("--workdir", workdir)
    if not executable.startswith("/"):
        raise ConfigError(f"--exec {executable[:60]!a}: must be an absolute path")
    _unit_value("--exec", executable)
    offset = offset_for(every)
    # a user of its own for each run unless one is named (which a sysusers.d file creates)
    who = "DynamicUser=yes\n" if user is None else f"User={user}\n"
    service = f"""\
[Unit]
Description=catchup tick: run what is due, exactly once per period
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
# nothing new starts after --max-time (the timer's interval): the next tick is never held back
ExecStart={_quote(executable)} -q tick --max-time {every}m
# CATCHUP_DSN=… (and CATCHUP_CONFIG) go here, readable by root only
EnvironmentFile=-/etc/catchup/env
# a missing DSN is an error, never a database on this host
Environment=CATCHUP_EMBEDDED=never
WorkingDirectory={workdir}
{who}StateDirectory={name}
# a last resort for a hung job without a timeout: longer than your longest job's timeout
TimeoutStartSec={deadline}
# catchup stops and records its running jobs on SIGTERM; the rest of the group goes after
KillMode=mixed
TimeoutStopSec=60
{SANDBOX}"""
    timer = f"""\
[Unit]
Description=catchup tick every {every} minute(s), {offset} minute(s) off the hour

[Timer]
OnCalendar={f"*:{offset:02d}" if every >= 60 else f"*:{offset:02d}/{every}"}
Persistent=true
RandomizedDelaySec=30
AccuracySec=1s

[Install]
WantedBy=timers.target
"""
    files = {f"{name}.service": service, f"{name}.timer": timer}
    if user is not None:  # the user the units name, made by systemd-sysusers if it is missing
        files[f"{name}-sysusers.conf"] = f'u {user} - "catchup jobs" /var/lib/{name}\n'

    if serve:
        files[f"{name}-serve.service"] = f"""\
[Unit]
Description=catchup serve: the status page and /metrics on 127.0.0.1:{SERVE_PORT} (read-only)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
ExecStart={_quote(executable)} -q serve --listen 127.0.0.1:{SERVE_PORT} --refresh 60s
EnvironmentFile=-/etc/catchup/env
Environment=CATCHUP_EMBEDDED=never
WorkingDirectory={workdir}
{who}Restart=on-failure
RestartSec=5
{SANDBOX}
[Install]
WantedBy=multi-user.target
"""
    return Recipe(files)


def _quote(program: str) -> str:
    """The program of an ``ExecStart=`` line: plain when it is, else double-quoted with ``\\``
    and ``"`` escaped and ``%`` doubled, so systemd expands no specifier in it (it expands no
    ``$VARIABLE`` in the program; control characters are refused before)."""
    if program and all(c.isascii() and (c.isalnum() or c in "/._-") for c in program):
        return program
    escaped = program.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("%", "%%") + '"'
