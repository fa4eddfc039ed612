"""Catching up: what ``replay`` and ``tick`` run (gaps oldest first, catch-up policies,
upstream first), planned before anything is claimed, and the worker pool and its dispatcher that
hand the periods out."""
