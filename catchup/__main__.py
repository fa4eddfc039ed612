"""``python -m catchup``."""

from .cli import main

main()
