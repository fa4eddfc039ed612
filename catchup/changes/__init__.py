"""Changes people make to the ledger by hand: mark, reset, adopt, rename, retire,
pause, resume, cancel (and ``ps``), and the jobs a rename in progress holds."""
