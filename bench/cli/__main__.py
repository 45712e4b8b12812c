"""`python -m bench.cli ARGS`: the `bench` command, for a Python without the console script on its path."""
import sys

from bench.cli.main import main

sys.exit(main())
