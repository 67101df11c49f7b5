"""A real BPE tokenizer for the estimator, loaded offline.

``TiktokenTokenizer`` implements ``estimator.tokens.Tokenizer`` with tiktoken's ``cl100k_base``.
tiktoken would download the BPE file on first use; litellm ships a copy in its package (under
``litellm_core_utils/tokenizers``, named as tiktoken's cache names it), so the encoding is loaded
from there with ``TIKTOKEN_CACHE_DIR`` pointing at it, without importing litellm (slow) and
without touching the network. The file's digest is checked first: tiktoken deletes a cache file
whose digest is wrong and downloads it again, which must never happen here. When anything is
missing the tokenizer falls back to ``ApproxTokenizer`` and says so in ``exact`` / ``fallback_reason``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any

from estimator.tokens import ApproxTokenizer

__all__ = ["TiktokenTokenizer", "bundled_tiktoken_dir"]

log = logging.getLogger(__name__)

ENCODING = "cl100k_base"
# tiktoken caches a download under sha1(url); this is that name for cl100k_base, and its sha256.
_CL100K_CACHE_NAME = "9b5ad71b2ce5302211f9c61530b329a4922fc6a4"
_CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"

_LOAD_LOCK = threading.Lock()
_ENCODING_CACHE: dict[str, Any] = {}


def bundled_tiktoken_dir() -> Path | None:
    """litellm's bundled tokenizer directory, located without importing litellm."""
    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "litellm_core_utils" / "tokenizers"
        if candidate.is_dir():
            return candidate
    return None


def _load_cl100k() -> Any:
    """The tiktoken Encoding, or raise with the reason."""
    with _LOAD_LOCK:
        if ENCODING in _ENCODING_CACHE:
            return _ENCODING_CACHE[ENCODING]
        directory = bundled_tiktoken_dir()
        if directory is None:
            raise FileNotFoundError("litellm's bundled tokenizer directory was not found")
        bpe = directory / _CL100K_CACHE_NAME
        if not bpe.is_file():
            raise FileNotFoundError(f"the bundled {ENCODING} file is missing from litellm's package")
        if hashlib.sha256(bpe.read_bytes()).hexdigest() != _CL100K_SHA256:
            raise ValueError(f"the bundled {ENCODING} file has an unexpected digest")
        import tiktoken

        previous = os.environ.get("TIKTOKEN_CACHE_DIR")
        os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
        try:
            encoding = tiktoken.get_encoding(ENCODING)
        finally:
            # tiktoken keeps loaded encodings in memory; restore what the process had
            if previous is None:
                os.environ.pop("TIKTOKEN_CACHE_DIR", None)
            else:
                os.environ["TIKTOKEN_CACHE_DIR"] = previous
        _ENCODING_CACHE[ENCODING] = encoding
        return encoding


class TiktokenTokenizer:
    """``cl100k_base`` token counts and truncation, offline; ``ApproxTokenizer`` if it cannot load.

    ``exact`` is False when the fallback is in use, and ``fallback_reason`` says why.
    """

    def __init__(self) -> None:
        self._approx = ApproxTokenizer()
        self._encoding: Any = None
        self.fallback_reason: str | None = None
        try:
            self._encoding = _load_cl100k()
        except Exception as exc:
            self.fallback_reason = f"{type(exc).__name__}: {exc}"
            log.warning(
                "tiktoken %s unavailable offline (%s); using the approximate tokenizer", ENCODING, self.fallback_reason
            )

    @property
    def exact(self) -> bool:
        return self._encoding is not None

    @property
    def name(self) -> str:
        return ENCODING if self.exact else "approx"

    def count(self, text: str) -> int:
        if self._encoding is None:
            return self._approx.count(text)
        return len(self._encoding.encode(text, disallowed_special=()))

    def truncate(self, text: str, max_tokens: int) -> str:
        if self._encoding is None:
            return self._approx.truncate(text, max_tokens)
        if max_tokens <= 0:
            return ""
        tokens: list[int] = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        # a cut inside a multi-byte character leaves a partial character at the end: drop it
        raw: bytes = self._encoding.decode_bytes(tokens[:max_tokens])
        cut = raw.decode("utf-8", errors="ignore")
        while cut and not text.startswith(cut):
            cut = cut[:-1]
        return cut
