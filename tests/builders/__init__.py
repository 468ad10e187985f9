"""Constructors of inputs whose right answer is known by construction (attention maps with a known
pattern, small stores, word tables). Not tests and not fixtures: plain functions the tests call with
their own parameters. Shared pytest fixtures live in tests/conftest.py."""
