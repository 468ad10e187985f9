"""Models: loading (encoders and decoders), their attention layers, encoding, fine-tuning, metrics and Table 1."""
