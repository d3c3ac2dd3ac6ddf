"""One module per ``icl-cmr`` subcommand, each with ``register(subparsers)``."""
