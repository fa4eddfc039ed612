"""The one render layer: every result of the facade for people (``tables``, ``scan``), for
scripts (``json``) and for other programs (``documents``: Markdown, OpenMetrics), with one
formatter each for text, durations, instants and schedules (``text``). Nothing here talks to
the database or knows click."""
