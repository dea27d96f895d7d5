"""``python -m ddp_tui.scriptrun``: see :mod:`.runner`."""

import sys

from .runner import main

sys.exit(main())
