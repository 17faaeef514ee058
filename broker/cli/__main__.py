"""`python -m samsa.broker.cli …`: what the `samsa` command runs (how tests and the launcher start a broker)."""

import sys

from samsa.broker.cli import main

sys.exit(main())
