"""Prefix reuse on the proxy's side: prompts whose masks share the longest prefix, sent in the order that
reuses the most of it.

A scoring model evaluates a prompt left to right; a prompt that begins with the tokens of the one before
it only evaluates the tokens after their common prefix (the in-process scorer keeps its KV cache across
calls; a llama.cpp server does the same with prompt caching). The masks of one trace differ only from
the first removed source on, so two things decide how much is evaluated again:

* the order of the sources in the prompt (``block_order``): grouped by layer (a layer's removal is one
  cut), the layers and, inside a layer, the sources largest first. The removal of a source re-evaluates
  what follows it, so the large ones go where little follows. The instructions are the system message
  and always come first; the question and the claim close every prompt.
* the order the masks are scored in (``PrefixOrderedScorer``): the masks of a round are sent together,
  so the scorer picks, each time it is free, the waiting prompt that shares the longest prefix with the
  one it evaluated last; among equals, the one on the smallest branch of the waiting prompts, so a round
  ends inside the largest branch, the one the next round most likely shares (a depth-first walk of the
  prompts' prefix tree, the small branches first).

Neither changes what a mask measures: every prompt of a trace holds its sources in the same order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

import anyio

from estimator.corpus.units import PROVENANCE_LAYER_ORDER, Corpus
from estimator.judge import Mask
from estimator.loo.logprob import LogprobScalar, build_messages
from estimator.seams.llm import Message
from estimator.seams.scorer import ScoredTarget, Scorer
from estimator.target import SENTENCE, Wording
from estimator.tokens import Tokenizer

__all__ = [
    "BlockOrder",
    "OrderedLogprobScalar",
    "PrefixOrderedScorer",
    "block_order",
    "evaluated",
    "next_index",
    "ordered_messages",
]

BlockOrder = Literal["size", "ordinal"]
_S = TypeVar("_S", str, tuple[str, ...])
SETTLE_CHECKPOINTS = 8
"""Checkpoints the scorer waits, when it was idle, for the other masks of a round to arrive."""


def block_order(
    corpus: Corpus,
    texts: Mapping[str, str],
    tokenizer: Tokenizer,
    how: BlockOrder = "size",
) -> tuple[str, ...]:
    """The order of the sources in every prompt of a proxy trace (ids). ``ordinal``: as the turn had them;
    ``size``: grouped by layer, largest layer first, and inside a layer largest source first (ties by
    ordinal)."""
    units = sorted(corpus.units, key=lambda u: u.ordinal)
    if how == "ordinal":
        return tuple(u.id for u in units)
    size = {u.id: tokenizer.count(texts[u.id]) for u in units}
    layer_size = {layer: sum(size[u.id] for u in units if u.layer == layer) for layer in PROVENANCE_LAYER_ORDER}
    rank = {layer: i for i, layer in enumerate(PROVENANCE_LAYER_ORDER)}
    return tuple(
        u.id for u in sorted(units, key=lambda u: (-layer_size[u.layer], rank[u.layer], -size[u.id], u.ordinal))
    )


def ordered_messages(
    corpus: Corpus,
    query: str,
    mask: Mask,
    texts: Mapping[str, str],
    order: Sequence[str],
    wording: Wording = SENTENCE,
) -> tuple[Message, ...]:
    """``logprob.build_messages`` with the sources in ``order``."""
    return build_messages(corpus, query, mask, texts, order, wording)


@dataclass
class OrderedLogprobScalar(LogprobScalar):
    """The log-probability scalar with the sources in the proxy's prefix order (``block_order``)."""

    order: tuple[str, ...] = ()

    def sent(self, mask: Mask) -> tuple[Message, ...]:
        order = self.order or tuple(u.id for u in sorted(self.corpus.units, key=lambda u: u.ordinal))
        return ordered_messages(self.corpus, self.query, mask, self.texts, order, self.wording)


def _lcp(a: _S, b: _S) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def next_index(pending: Sequence[_S], last: _S) -> int:
    """Which waiting prompt to evaluate next after ``last``: one sharing the longest prefix with it; among
    those, one on the smallest branch where they part (fewest prompts, recursively: a depth-first walk of
    their prefix tree, small branches first, so the walk ends in the largest); then the smallest. Works on
    text or on tuples of block ids."""
    if not pending:
        raise ValueError("nothing is waiting")
    shared = [_lcp(p, last) for p in pending]
    best = max(shared)
    group = [i for i, n in enumerate(shared) if n == best]
    while len(group) > 1:
        first = pending[group[0]]
        depth = min(_lcp(first, pending[i]) for i in group[1:])
        branches: dict[object, list[int]] = {}
        for i in group:
            branches.setdefault(pending[i][depth] if len(pending[i]) > depth else None, []).append(i)
        if len(branches) == 1:  # the same prompt more than once
            break
        group = min(branches.values(), key=lambda b: (len(b), min(pending[i] for i in b)))
    return min(group, key=lambda i: pending[i])


def _key(messages: Sequence[Message], target: str) -> str:
    return "".join(f"\x1e{m.role}\x1f{m.content}" for m in messages) + "\x1d" + target


@dataclass
class PrefixOrderedScorer:
    """A ``Scorer`` that sends one prompt at a time, choosing among the waiting ones by ``next_index``.

    Calls to the inner scorer never overlap (a local model evaluates one prompt at a time anyway). A call
    cancelled while it waits leaves the queue; one cancelled while it runs hands the turn on."""

    inner: Scorer
    settle: int = SETTLE_CHECKPOINTS
    order: list[str] = field(default_factory=list)
    """The prompts' keys in the order they were sent (for tests and measurement)."""
    _pending: dict[int, str] = field(default_factory=dict)
    _wake: dict[int, anyio.Event] = field(default_factory=dict)
    _busy: bool = False
    _last: str = ""
    _count: int = 0

    @property
    def model(self) -> str:
        return self.inner.model

    async def score(self, messages: Sequence[Message], target: str) -> ScoredTarget:
        me, key = self._count, _key(messages, target)
        self._count += 1
        self._pending[me] = key
        wake = self._wake[me] = anyio.Event()
        if not self._busy:
            self._busy = True
            for _ in range(self.settle):  # the other masks of the round are on their way
                await anyio.sleep(0)
            self._hand_on()
        try:
            await wake.wait()
        except BaseException:
            if wake.is_set():  # it was this call's turn: pass it on
                self._hand_on()
            else:
                self._pending.pop(me, None)
                self._wake.pop(me, None)
            raise
        try:
            self.order.append(key)
            return await self.inner.score(messages, target)
        finally:
            self._last = key
            self._hand_on()

    def _hand_on(self) -> None:
        if not self._pending:
            self._busy = False
            return
        ids = list(self._pending)
        chosen = ids[next_index([self._pending[i] for i in ids], self._last)]
        self._pending.pop(chosen)
        self._wake.pop(chosen).set()


def evaluated(
    prompts: Sequence[tuple[str, ...]],
    sizes: Mapping[str, int],
    start: tuple[str, ...] = (),
) -> tuple[int, tuple[str, ...]]:
    """Tokens a prefix-reusing scorer evaluates for ``prompts`` (tuples of block ids, each block of
    ``sizes[id]`` tokens) sent together and ordered by ``next_index``, starting from ``start`` in its
    cache; and the prompt it ends with. Used by the cost gate to estimate the local seconds."""
    waiting = list(prompts)
    last = start
    total = 0
    while waiting:
        i = next_index(waiting, last)
        prompt = waiting.pop(i)
        common = _lcp(prompt, last)
        total += sum(sizes[b] for b in prompt[common:]) or sizes[prompt[-1]]  # at least the last block
        last = prompt
    return total, last
