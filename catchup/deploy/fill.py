"""The recipes' long texts, kept as files in ``templates/`` beside this module and filled in
with :class:`string.Template` (``${name}``), so a manifest reads as the YAML it prints. Every
value is made safe by its recipe before it is filled in (JSON strings, which YAML reads as
plain text); a name a template lacks, or one it has that is not given, is an error."""

from __future__ import annotations

import functools
from pathlib import Path
from string import Template

TEMPLATES = Path(__file__).parent / "templates"


@functools.cache
def _template(name: str) -> Template:
    return Template((TEMPLATES / name).read_text())


def render_template(name: str, **values: object) -> str:
    """``templates/NAME`` with each ``${key}`` replaced by ``str(values[key])``."""
    return _template(name).substitute({key: str(value) for key, value in values.items()})
