"""How much of a long report people are shown (importable without Rich, so the command line's
options can name the defaults and still start fast)."""

GAP_LIMIT = 50  # gap ranges a table or Markdown report shows unless told otherwise
