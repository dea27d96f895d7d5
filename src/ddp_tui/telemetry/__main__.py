"""``python -m ddp_tui.telemetry``: see :mod:`.cli`."""

import sys

from .cli import main

sys.exit(main())
