"""Analyses of attention heads across models: the study's top-N table, first-presentation
preferences of repeated words, and training dynamics."""
