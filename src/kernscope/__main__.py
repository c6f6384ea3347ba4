"""``python -m kernscope`` = the ``kernscope`` command."""

from .cli import run

run()
