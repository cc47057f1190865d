"""``python -m examples.pytorch_ps`` (from the repository root) runs :mod:`train`."""

import sys

from examples.pytorch_ps.train import main

sys.exit(main())
