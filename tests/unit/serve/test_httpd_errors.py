"""What serve says when a request fails: a client that hung up mid-answer (a closed tab, a
probe that timed out) is nobody's error and says nothing; anything else is one line naming
its type, never a traceback nor the error's text (which may quote a secret)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from catchup.serve.httpd import Server


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (BrokenPipeError(32, "Broken pipe"), ""),
        (ConnectionResetError(104, "Connection reset by peer"), ""),
        (TimeoutError("timed out"), ""),
        (
            ValueError("postgresql://u:secretpw@db/x"),
            "catchup serve: a request failed unexpectedly (ValueError); serving on\n",
        ),
    ],
)
def test_a_request_that_failed_is_said_in_one_line_or_not_at_all(
    error: Exception, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        raise error
    except Exception:
        Server.handle_error(cast(Any, None), None, None)
    assert capsys.readouterr().err == said
