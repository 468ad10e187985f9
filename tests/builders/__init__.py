"""Constructors of inputs whose right answer is known by construction (attention maps with a known
pattern, small stores, word tables). Not tests and not fixtures: plain functions the tests call with
their own parameters. Shared pytest fixtures live in tests/conftest.py."""


def identity_attrs(task: str, variant: str, **config) -> dict:
    """The identity attributes a store extracted under `config` (a config dict; defaults filled) records:
    what an analysis step run with the same config expects (bertology.store.expected_attrs)."""
    import json

    from bertology.pipeline.config import validate_config
    from bertology.pipeline.configjson import sections_from_json
    from bertology.store import expected_attrs

    return expected_attrs(sections_from_json(json.dumps(validate_config(config))), task, variant)
