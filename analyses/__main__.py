import sys

from analyses.cli import main

sys.exit(main())
