"""The errors of finding, checking and loading a model: each a :class:`~bertology.pipeline.errors.UserError`
printed as one line that names the problem and the fix."""

from __future__ import annotations

from bertology.pipeline.errors import UserError


class ModelNotFoundError(UserError, RuntimeError):
    """The model cannot be found or reached; the message says what to use instead."""


class UnsupportedModelError(UserError, ValueError):
    """The model is neither a bidirectional encoder nor a decoder language model with a sequence-classification
    head (an encoder-decoder, a BERT configured as a decoder, ...), or its directory is broken (config.json or
    weights unreadable)."""


class TokenizerError(UserError, ValueError):
    """A model directory's tokenizer is missing or unusable (it would read every word as unknown)."""


class CustomCodeError(UserError, ValueError):
    """A model directory asks for its own Python code, which bertology never runs."""


class MaxLengthError(UserError, ValueError):
    """data.max_length is more than the model's position embeddings hold."""
