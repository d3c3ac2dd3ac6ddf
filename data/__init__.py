"""Small data files this project made (see README.md here), installed as ``icl_cmr.data``."""
