"""Recipes for the one scheduler that calls ``catchup tick``: a Kubernetes CronJob (here), or a
systemd service and timer (``catchup.deploy.systemd``). Values are quoted as JSON strings, which
YAML
and systemd read as plain text; nothing the user types becomes structure."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import ConfigError
from ..render.pasted import shell
from .fill import render_template
from .scheduler import SERVE_PORT, kubernetes_scheduler

# A CronJob's name is a DNS-1123 subdomain, at most 52 characters (its Jobs add 11); a systemd
# unit's name is letters, digits and ":_.-" (no "/", so the files stay in the output folder).
_KUBERNETES_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,50}[a-z0-9])?")
_SYSTEMD_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9:_.-]{0,99}")
# a Secret's or a ConfigMap's name: an RFC 1123 DNS subdomain, at most 253 characters
_SUBDOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")


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


def check_subdomain(option: str, name: str) -> None:
    """A usage error unless ``name`` can name a Secret or a ConfigMap: it reaches a YAML
    comment and the ``kubectl create`` line a person pastes, so nothing else gets there."""
    if len(name) > 253 or not _SUBDOMAIN.fullmatch(name):
        raise ConfigError(
            f"{option} {name[:60]!a}: a Kubernetes name is lower-case letters, digits, '-' and "
            "'.', starting and ending with a letter or digit, at most 253 characters"
        )


def setup_lines(secret: str, config_map: str, namespace: str | None) -> str:
    """The header's two commands that make the Secret and the ConfigMap, values quoted."""
    ns = ("--namespace", namespace) if namespace else ()
    create = shell("kubectl", "create", "secret", "generic", secret, *ns)
    config = shell("kubectl", "create", "configmap", config_map, *ns, "--from-file=catchup.toml")
    return f"#   {create} --from-literal=dsn='postgresql://…'\n#   {config}\n"


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


def kubernetes(  # noqa: PLR0913
    *,
    name: str,
    image: str,
    every: int,
    secret: str,
    config_map: str,
    namespace: str | None,
    serve: bool = False,
    deadline: int = 6 * 3600,
    scheduler: bool = False,
    grace: int = 30,
) -> Recipe:
    """A CronJob calling ``catchup tick`` (and with ``serve`` a Deployment serving the page);
    with ``scheduler``, instead, a Deployment of ``catchup scheduler`` replicas
    (:mod:`catchup.deploy.scheduler`), which serve the page themselves."""
    _check_kubernetes(name, every, secret, config_map, namespace, image)
    offset = offset_for(every)
    meta = f"  name: {json.dumps(name)}\n"
    if namespace:
        meta += f"  namespace: {json.dumps(namespace)}\n"
    setup = setup_lines(secret, config_map, namespace)
    if scheduler:
        body = kubernetes_scheduler(
            name=name,
            meta=meta,
            image=image,
            secret=secret,
            config_map=config_map,
            grace=grace,
            setup=setup,
        )
        return Recipe({f"{name}-scheduler.yaml": body})
    body = render_template(
        "cronjob.yaml",
        every=every,
        offset=offset,
        setup=setup,
        meta=meta,
        minutes=minutes(every, offset),
        starting_deadline=max(30, min(240, every * 60 - 30)),
        deadline=deadline,
        image=json.dumps(image),
        secret=json.dumps(secret),
        config_map=json.dumps(config_map),
    )
    files = {f"{name}-cronjob.yaml": body}
    if serve:
        files[f"{name}-serve.yaml"] = _kubernetes_serve(name, meta, image, secret, config_map)
    return Recipe(files)


def _check_kubernetes(
    name: str, every: int, secret: str, config_map: str, namespace: str | None, image: str
) -> None:
    """Every value a Kubernetes recipe puts into YAML, checked: one line naming the option."""
    check_name("kubernetes", name)
    check_every(every)
    check_subdomain("--secret", secret)
    check_subdomain("--config-map", config_map)
    if namespace is not None and not re.fullmatch(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?", namespace):
        raise ConfigError(f"--namespace {namespace[:70]!r}: not a Kubernetes namespace name")
    if not image.strip() or any(ord(c) < 0x21 for c in image):
        raise ConfigError("--image: an image reference, with no spaces or control characters")


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
