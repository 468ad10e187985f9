"""Attention maps as the page embeds them: quantised for display only, to uint8 (``round(a * 255)``, error <=
1/510), zlib-compressed and base64-encoded (the page inflates them with the browser's ``DecompressionStream``).
Pure."""

from __future__ import annotations

import base64
import zlib

import numpy as np

QUANT = 255  # display quantisation of attention: uint8 levels


def quantise(maps: np.ndarray) -> np.ndarray:
    """Attention (..., n, n) in [0, 1] -> uint8 levels round(a * 255) (display only; error <= 1/510)."""
    return np.clip(np.rint(np.nan_to_num(maps.astype(np.float32), nan=0.0) * QUANT), 0, QUANT).astype(np.uint8)


def encode_maps(q: np.ndarray) -> str:
    """uint8 maps -> base64 of their zlib (deflate) stream, as the page's DecompressionStream('deflate') reads."""
    return base64.b64encode(zlib.compress(np.ascontiguousarray(q).tobytes(), 9)).decode("ascii")


def decode_maps(text: str, shape: tuple[int, ...]) -> np.ndarray:
    """Inverse of :func:`encode_maps` (tests, notebooks)."""
    return np.frombuffer(zlib.decompress(base64.b64decode(text)), dtype=np.uint8).reshape(shape)
