"""``python -m kernscope`` = the ``kernscope`` command."""

from .replay import run

run()
