"""``python -m transformer_mt`` is the same as ``mt``."""

import sys

from transformer_mt.cli import main

sys.exit(main())
