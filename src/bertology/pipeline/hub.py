"""Whether the Hugging Face hub answers, asked without importing huggingface_hub or transformers: the one probe
that the model resolution (:mod:`bertology.models.loading`) and the data readers (:mod:`bertology.data.hub`,
:mod:`bertology.data.declared`) use to tell "offline" from "not found" in their messages."""

from __future__ import annotations

import os
import socket

HUB_HOST = "huggingface.co"


def hub_reachable(timeout: float = 3.0) -> bool:
    """True when the Hugging Face hub answers on TCP (and offline mode, HF_HUB_OFFLINE, is not forced)."""
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    try:
        with socket.create_connection((HUB_HOST, 443), timeout=timeout):
            return True
    except OSError:
        return False
