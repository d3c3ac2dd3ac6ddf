"""analyses: the studies built on cmr and adapters (head scans, fits, ablation, training
dynamics, figures, reports) and the ``icl-cmr`` command line. Plotting lives only here;
nothing imports from this package."""
