"""``python -m rffor``: the same as the ``rffor`` command."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
