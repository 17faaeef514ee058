import sys

from bench.storage import main

sys.exit(main())
