"""``python -m ddp_tui.cli``: the ``ddp-tui`` command."""

from __future__ import annotations

import sys

from ddp_tui.cli.entry import main

if __name__ == "__main__":
    sys.exit(main())
