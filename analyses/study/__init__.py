"""``icl-cmr run``, the study end to end: its stages (:mod:`.stages`), the resumable pipeline
that runs them (:mod:`.pipeline`), the run's settings and file names (:mod:`.layout`), its
report (:mod:`.report`) and figures (:mod:`.figures`)."""
from .stages import *  # noqa: F401,F403  (the package answers to the names of icl-cmr run)
from .stages import __all__  # noqa: F401
