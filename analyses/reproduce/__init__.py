"""The documented comparisons and recoveries as library functions (``icl-cmr reproduce NAME``):
published fits, heads against people, null shares, parameter recovery of textbook and semantic
CMR, and the model comparison on recall data."""
