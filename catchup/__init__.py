"""catchup: once-per-period jobs that run exactly once per period, with gaps found and replayed."""

__version__ = "0.1.0"
