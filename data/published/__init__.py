"""The study's published outputs, installed as package data (see README.md in this folder)."""
