"""``python -m examples.pytorch_ddp`` (from the repository root) runs :mod:`train` in one process;
launch the job with ``torchrun`` (see :mod:`train`)."""

import sys

from examples.pytorch_ddp.train import main

sys.exit(main())
