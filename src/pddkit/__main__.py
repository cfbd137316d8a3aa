import sys

from pddkit.cli import main

sys.exit(main())
