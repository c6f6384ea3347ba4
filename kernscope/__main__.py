"""``python -m kernscope`` = the ``kernscope`` command."""

import sys

from .cli import main

sys.exit(main())
