"""``python -m labkit.gpu --out DIR [--sections ...]``: see :mod:`labkit.gpu.cli`."""

import sys

from labkit.gpu.cli import main

sys.exit(main())
