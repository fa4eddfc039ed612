"""The systemd recipe for the one scheduler that calls ``catchup tick``: a service, a timer
(and one for ``catchup serve``), sandboxed, as a user that exists. Values are quoted so nothing
the user types becomes a directive."""

from __future__ import annotations

import re

from ..errors import ConfigError
from .scheduler import SERVE_PORT, systemd_scheduler
from .tick import Recipe, check_every, check_name, offset_for

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


# The sandbox of every unit: systemd-analyze security rates it (its score is in
# docs/how-to/deploy.md). It leaves
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


def systemd(  # noqa: PLR0913
    *,
    name: str,
    executable: str,
    every: int,
    user: str | None,
    workdir: str,
    serve: bool = False,
    deadline: int = 6 * 3600,
    scheduler: bool = False,
    grace: int = 30,
) -> Recipe:
    """A service and a timer calling ``catchup tick`` (and with ``serve`` a service serving
    the page); with ``scheduler``, instead, a long-running ``catchup scheduler`` service
    (:mod:`catchup.deploy.scheduler`), which serves the page itself."""
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
    sysusers = {f"{name}-sysusers.conf": f'u {user} - "catchup jobs" /var/lib/{name}\n'}
    if scheduler:
        unit = systemd_scheduler(
            executable=_quote(executable),
            workdir=workdir,
            who=who,
            name=name,
            grace=grace,
            sandbox=SANDBOX,
        )
        return Recipe({f"{name}-scheduler.service": unit} | (sysusers if user else {}))
    program = _quote(executable)
    service = _tick_service(program, every, workdir, who, name, deadline)
    files = {f"{name}.service": service, f"{name}.timer": _tick_timer(every, offset)}
    if user is not None:  # the user the units name, made by systemd-sysusers if it is missing
        files |= sysusers

    if serve:
        files[f"{name}-serve.service"] = _serve_service(program, workdir, who)
    return Recipe(files)


def _tick_service(
    program: str, every: int, workdir: str, who: str, name: str, deadline: int
) -> str:
    """The oneshot service a timer starts: one ``catchup tick``."""
    return f"""\
[Unit]
Description=catchup tick: run what is due, exactly once per period
Wants=network-online.target
After=network-online.target

[Service]
Type=oneshot
# nothing new starts after --max-time (the timer's interval): the next tick is never held back
ExecStart={program} -q tick --max-time {every}m
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


def _tick_timer(every: int, offset: int) -> str:
    """The timer that starts the tick every ``every`` minutes, ``offset`` off the hour."""
    return f"""\
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


def _serve_service(program: str, workdir: str, who: str) -> str:
    """A long-running ``catchup serve`` on 127.0.0.1 (read-only towards the ledger)."""
    return f"""\
[Unit]
Description=catchup serve: the status page and /metrics on 127.0.0.1:{SERVE_PORT} (read-only)
Wants=network-online.target
After=network-online.target

[Service]
Type=simple
ExecStart={program} -q serve --listen 127.0.0.1:{SERVE_PORT} --refresh 60s
EnvironmentFile=-/etc/catchup/env
Environment=CATCHUP_EMBEDDED=never
WorkingDirectory={workdir}
{who}Restart=on-failure
RestartSec=5
{SANDBOX}
[Install]
WantedBy=multi-user.target
"""


def _quote(program: str) -> str:
    """The program of an ``ExecStart=`` line: plain when it is, else double-quoted with ``\\``
    and ``"`` escaped and ``%`` doubled, so systemd expands no specifier in it (it expands no
    ``$VARIABLE`` in the program; control characters are refused before)."""
    if program and all(c.isascii() and (c.isalnum() or c in "/._-") for c in program):
        return program
    escaped = program.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("%", "%%") + '"'
