"""The language model as a free-recall subject: its recall scored and fitted like a person's
(:mod:`.llm_recall`), and the classic memory effects (:mod:`.battery`, :mod:`.effects`)."""
