import sys

from icl_cmr.analyses.cli import main

sys.exit(main())
