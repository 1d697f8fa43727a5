"""Is the Hugging Face hub off or out of reach? Asked before any slow import or download, by the
model loader (``encode``) and the ``hf:`` data reader (``io.texts``) alike."""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.request

#: seconds to wait for the hub to answer before calling it unreachable
HUB_PROBE_TIMEOUT = 3.0


def hf_offline_env() -> bool:
    return any(os.environ.get(k, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_reachable(timeout: float = HUB_PROBE_TIMEOUT) -> bool:
    """True when the HF endpoint answers within ``timeout`` seconds (any HTTP status counts).

    Runs in a daemon thread so that a hanging DNS lookup cannot hold us past ``timeout``.
    """
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    result: dict[str, bool] = {}

    def probe() -> None:
        try:
            req = urllib.request.Request(endpoint + "/api/models?limit=1", method="HEAD")
            with urllib.request.urlopen(req, timeout=timeout):
                result["ok"] = True
        except urllib.error.HTTPError:
            result["ok"] = True  # it answered
        except Exception:  # noqa: BLE001 - DNS failure, refused, timeout, TLS: all "unreachable"
            result["ok"] = False

    t = threading.Thread(target=probe, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    return result.get("ok", False)
