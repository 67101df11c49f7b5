"""A local GGUF model in-process (llama-cpp-python, the optional ``[local]`` extra): the ``Scorer``.

``LocalModel`` loads one model once (``logits_all=True``) and serialises access to it with a lock;
``LlamaCppScorer`` computes log p(target | messages) in one forward pass over the chat-templated prompt
followed by the target: the log-softmax of the logits at position i−1, read at token i, for every
target token. Consecutive scorings share their longest common token prefix in the KV cache (the
masks of one trace differ only from the first removed source on), so only the changed suffix is
evaluated; and only the target's rows of logits are computed and copied (the prompt's are not read: on
this CPU that makes a pass 1.1× faster with the 1.5B model and 1.6× with the 0.5B one, whose vocabulary
is most of its work). The chat adapter over the same model is ``llm_llamacpp.LlamaCppLLM``.

The quantity is the one ``CompletionsScorer`` reads from a llama.cpp server's echo: the template's BOS
text (``<|endoftext|>`` for Qwen, whose tokenizer adds none) is prepended, as the server's off-by-one
correction does, so the two agree to within numerical noise.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio.to_thread

from estimator.seams.llm import Message
from estimator.seams.scorer import QWEN_TEMPLATE, ChatTemplate, ScoredTarget, ScorerError

__all__ = ["LlamaCppScorer", "LocalModel", "LocalModelUnavailable", "load_llama_cpp"]

INSTALL_HINT = (
    "the local-model extra is not installed: run scripts/local-model.sh build (it compiles "
    "llama-cpp-python once and installs it), or pip install 'provenance-service[local]'"
)


class LocalModelUnavailable(RuntimeError):
    """llama-cpp-python is missing, or the model file cannot be loaded."""


def load_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise LocalModelUnavailable(INSTALL_HINT) from exc
    return llama_cpp


class LocalModel:
    """One GGUF model in this process, shared by the scorer and the chat adapter (one call at a time)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        template: ChatTemplate = QWEN_TEMPLATE,
        seed: int = 0,
    ) -> None:
        model_path = Path(path)
        if not model_path.is_file():
            raise LocalModelUnavailable(f"no model file at {model_path}")
        llama_cpp = load_llama_cpp()
        try:
            threads = n_threads or os.cpu_count() or 1  # prompt evaluation too (llama.cpp's n_threads_batch)
            self.llama: Any = llama_cpp.Llama(
                model_path=str(model_path),
                n_ctx=n_ctx,
                logits_all=True,
                n_threads=threads,
                n_threads_batch=threads,
                seed=seed,
                verbose=False,
            )
        except (ValueError, RuntimeError) as exc:
            raise LocalModelUnavailable(f"cannot load {model_path.name}: {exc}") from exc
        self.path = model_path
        self.template = template
        self.n_ctx = n_ctx
        self.name = f"local/{model_path.stem}"
        self.lock = threading.Lock()
        self.adds_bos = bool(self.llama._model.add_bos_token())

    def tokenize(self, text: str) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=self.adds_bos, special=True))

    def close(self) -> None:
        close = getattr(self.llama, "close", None)
        if callable(close):
            close()


class LlamaCppScorer:
    """``estimator.seams.scorer.Scorer`` over a ``LocalModel``; see the module docstring."""

    def __init__(self, model: LocalModel, *, prepend_bos: bool = True, reuse_prefix: bool = True) -> None:
        self.local = model
        self.prepend_bos = prepend_bos and not model.adds_bos and model.template.bos_text is not None
        self.reuse_prefix = reuse_prefix  # off: every scoring evaluates its whole prompt (for measurement)
        self.evaluated_tokens = 0  # tokens actually run through the model (prefix reuse saves the rest)
        self.scored_tokens = 0  # tokens of every prompt scored: what no prefix reuse would evaluate
        self.eval_seconds = 0.0  # time spent evaluating

    @property
    def model(self) -> str:
        return self.local.name

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        if not target:
            raise ScorerError("nothing to score: the target is empty")
        return await anyio.to_thread.run_sync(self._score_sync, tuple(messages), target)

    def _eval(self, tokens: list[int], *, logits: bool) -> None:
        """Evaluate ``tokens`` after the cached ones; with ``logits`` off, only the last row of each batch
        is computed and none is copied (llama-cpp-python's ``eval`` reads ``_logits_all`` per call)."""
        if tokens:
            self.local.llama._logits_all = logits
            self.local.llama.eval(tokens)

    def _score_sync(self, messages: tuple[Message, ...], target: str) -> ScoredTarget:
        import numpy as np

        template = self.local.template
        prefix = (template.bos_text or "") * self.prepend_bos + template.render_prefix(messages)
        head = self.local.tokenize(prefix)
        full = self.local.tokenize(prefix + target)
        if full[: len(head)] != head or len(full) <= len(head):
            raise ScorerError("no token boundary where the target starts: the tokenizer merged it with the prompt")
        if len(full) >= self.local.n_ctx:
            raise ScorerError(
                f"the prompt is {len(full)} tokens, over the local context of {self.local.n_ctx} "
                "(raise it with --n-ctx)"
            )
        llama = self.local.llama
        with self.local.lock:
            cached = list(llama.input_ids[: llama.n_tokens])
            common = 0
            for a, b in zip(cached, full, strict=False):
                if a != b:
                    break
                common += 1
            # the last prompt token and the target are always evaluated: their logits are read below
            common = min(common, len(head) - 1) if self.reuse_prefix else 0
            llama.n_tokens = common
            started = time.perf_counter()
            try:
                self._eval(full[common : len(head) - 1], logits=False)
                self._eval(full[len(head) - 1 :], logits=True)
            except Exception as exc:
                llama.reset()
                raise ScorerError(f"the local model failed to evaluate the prompt: {exc}") from exc
            finally:
                llama._logits_all = True
            self.eval_seconds += time.perf_counter() - started
            self.evaluated_tokens += len(full) - common
            self.scored_tokens += len(full)
            if hasattr(llama, "_requires_eval"):
                llama._requires_eval = True
            rows = np.asarray(llama.scores[len(head) - 1 : len(full) - 1], dtype=np.float64)
        peak = rows.max(axis=1, keepdims=True)
        log_norm = peak[:, 0] + np.log(np.exp(rows - peak).sum(axis=1))
        ids = full[len(head) :]
        values = [float(rows[i, tok] - log_norm[i]) for i, tok in enumerate(ids)]
        pieces = [
            llama.detokenize([tok], prev_tokens=full[: len(head) + i]).decode("utf-8", errors="replace")
            for i, tok in enumerate(ids)
        ]
        return ScoredTarget.of(values, pieces, prompt_tokens=len(head))
