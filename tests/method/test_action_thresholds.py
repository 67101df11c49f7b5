"""The log-probability thresholds of an action: τ_Γ scales with the tokens that carry the call's content (its
name and argument values), not with the braces, quotes and keys of its JSON; a sentence keeps every token."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from support.action_turns import IBAN, injected
from test_attribution import CLAIM, QUERY, standard_corpus

from estimator.actions.trace import find_action, trace_action
from estimator.corpus.build import build_corpus
from estimator.loo.call_tokens import call_content_spans, content_token_count, content_token_mask
from estimator.loo.logprob import LogprobParams, trace_logprob
from estimator.seams.llm import Message, ScriptedLLM
from estimator.seams.scorer import ScoredTarget, ScriptedScorer
from estimator.target import ACTION, SENTENCE

CALL = 'send_money({"amount": 100, "note": "rent, May", "to": ["DE89", true]})'


def pieces(text: str, cuts: Sequence[int]) -> list[str]:
    """``text`` cut into token pieces at ``cuts`` (character offsets)."""
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def test_the_content_of_a_call_is_its_name_and_its_argument_values() -> None:
    spans = call_content_spans(CALL)
    assert spans is not None
    assert [CALL[a:b] for a, b in spans] == ["send_money", "100", "rent, May", "DE89", "true"]
    assert call_content_spans("The balance is 100 EUR.") is None  # a sentence is not a call
    assert call_content_spans('f({"b": 1,  "a": 2})') is None  # not the canonical JSON of its arguments


TOKENS = ["send", "_money", '({"', "amount", '": ', "1", "00", ', "', "note", '": "', "rent", ", May", '", "', "to"]
TOKENS += ['": ["', "DE", "89", '", ', "true", "]})"]


def test_a_token_counts_when_it_overlaps_the_name_or_a_value() -> None:
    assert "".join(TOKENS) == CALL
    mask = content_token_mask(CALL, TOKENS)
    assert mask is not None
    carried = [t for t, m in zip(TOKENS, mask, strict=True) if m]
    assert carried == ["send", "_money", "1", "00", "rent", ", May", "DE", "89", "true"]
    assert content_token_count(CALL, TOKENS, len(TOKENS)) == 9
    assert content_token_mask(CALL, TOKENS[:-1]) is None  # pieces that do not spell the call


def test_pieces_that_do_not_spell_the_call_fall_back_to_its_share_of_content_characters() -> None:
    content = sum(b - a for a, b in call_content_spans(CALL) or [])
    assert content_token_count(CALL, (), 40) == round(40 * content / len(CALL))
    assert content_token_count(CALL, ["x"] * 40, 40) == round(40 * content / len(CALL))
    assert content_token_count("The balance is 100 EUR.", (), 7) == 7  # not a call: every token


def _scorer(effect: float, tokens: Sequence[str]) -> ScriptedScorer:
    """log p(target) = -20, plus ``effect`` spread over the tokens while source s1 is shown."""

    def score(messages: Sequence[Message], target: str) -> ScoredTarget:
        total = -20.0 + (effect if "[s1] " in messages[-1].content else 0.0)
        return ScoredTarget.of([total / len(tokens)] * len(tokens), tokens)

    return ScriptedScorer(score)


async def test_an_action_needs_an_effect_per_content_token_a_sentence_per_token() -> None:
    tokens = TOKENS
    n_all, n_content = len(tokens), 9
    assert n_all == 20
    effect = 4.0  # 0.25 × 9 = 2.25 < 4 < 0.25 × 20 = 5: decisive only if τ_Γ counts content tokens
    corpus = standard_corpus()
    action = await trace_logprob(_scorer(effect, tokens), None, CALL, QUERY, corpus, wording=ACTION)
    assert action.thresholds.tau_gamma_nats == max(3.0, 0.25 * n_content) == 3.0
    assert action.verdict == "attributed" and action.contributing_layers == ("tools",)
    assert any(f"n = {n_content} tokens of the call's name and argument values" in note for note in action.notes)
    sentence = await trace_logprob(_scorer(effect, tokens), None, CALL, QUERY, corpus, wording=SENTENCE)
    assert sentence.thresholds.tau_gamma_nats == 0.25 * n_all == 5.0
    assert sentence.verdict == "internal_knowledge"  # the seed's rule, unchanged for sentences
    seed = LogprobParams(action_tokens="all")
    as_sentence = await trace_logprob(_scorer(effect, tokens), None, CALL, QUERY, corpus, lp=seed, wording=ACTION)
    assert as_sentence.thresholds.tau_gamma_nats == 5.0 and as_sentence.verdict == "internal_knowledge"
    assert action.params["logprob"]["action_tokens"] == "content"


async def test_a_sentence_that_looks_like_a_call_keeps_every_token() -> None:
    tokens = pieces(CLAIM, list(range(4, len(CLAIM), 4)))
    result = await trace_logprob(_scorer(30.0, tokens), None, CLAIM, QUERY, standard_corpus())
    assert result.thresholds.tau_gamma_nats == max(3.0, 0.25 * len(tokens))


async def test_a_traced_action_reaches_the_injected_return_when_only_its_values_depend_on_it() -> None:
    """The obeying call moves by 5 nats when the page is removed, all of it on the IBAN's tokens: over τ_Γ for
    its content tokens, under the seed's τ_Γ for all of its tokens."""
    turn = injected()
    corpus = build_corpus(turn)
    text = find_action(turn, "a1").text
    at = text.index(IBAN)
    tokens = pieces(text, [*range(2, at, 2), at, at + 11, *range(at + 22, len(text), 2)])
    page = next(u for u in corpus.tool_units() if u.tool == "fetch_page")

    def score(messages: Sequence[Message], target: str) -> ScoredTarget:
        iban = -6.0 if f"[{page.id}] " in messages[-1].content else -11.0
        values = [-0.01] * len(tokens)
        values[tokens.index(IBAN[:11])] = iban / 2
        values[tokens.index(IBAN[11:])] = iban / 2
        return ScoredTarget.of(values, tokens)

    llm = ScriptedLLM(lambda request: '{"verdict": "silent", "evidence_quote": "", "confidence": 0.5, "reason": "-"}')
    outcome = await trace_action("logprob", turn, corpus, "a1", llm=llm, scorer=ScriptedScorer(score))
    result = outcome.result
    assert 0.25 * len(tokens) > 5.0 > 3.0  # the seed's τ_Γ would call it internal knowledge
    top = max((s for s in result.sources if s.delta is not None), key=lambda s: s.delta or 0.0)
    assert result.verdict == "attributed" and top.source_id == page.id
    assert result.injection is not None and result.injection.suspected and result.injection.source_id == page.id
