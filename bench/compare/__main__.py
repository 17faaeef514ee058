import sys

from bench.compare import main

sys.exit(main(sys.argv[1:]))
