"""Every number and word a trace reports, explained: one line a non-specialist reads, and a paragraph.

The viewer shows ``short`` beside a number and ``detail`` one click away; the command line prints
``short`` where a number appears and ``provenance explain [TERM]`` prints both; ``GET /v1/glossary``
serves them. Keys name the JSON fields they explain (``gamma``, ``role.grounds``, ``calls.cached``, …):
every role, verdict and span-check label the estimator can return has one (a test holds this), and so do the
states of a job, a sentence, a probe and a declared credit and each parameter of ``Params`` (``params.<name>``),
whose words are in ``glossary_words``.

A term's ``label`` is the word shown in place of the value it explains (a verdict's title, a role beside a
drop, what a source says): the viewer and the command line take these words from here, and the words for
the estimator's own values come from ``estimator.loo.labels``, so each is defined once.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from estimator.loo.diagnosis import GROUNDED, KNEW_IT, MISREAD, OVERRODE, UNVERIFIABLE
from estimator.loo.labels import (
    DIAGNOSIS_LABELS,
    INSTRUCTION_SUPPORT_LABELS,
    ROLE_LABELS,
    SUPPORT_LABELS,
    VERDICT_LABELS,
)
from estimator.params import DEFAULT_PARAMS as _P
from estimator.params import Params
from estimator.proxy.confirm import DEFAULT_PROXY_PARAMS as _PP
from provenance_api.core.glossary_words import PARAM_WORDS, STATE_TERMS, param_bounds

__all__ = ["GLOSSARY", "GlossaryOut", "Term", "diagnosis_label", "find", "glossary_out", "label", "short"]


class Term(BaseModel):
    """One explained word: ``short`` in one line (≤ 120 characters), ``detail`` in a paragraph."""

    model_config = ConfigDict(frozen=True)

    key: str = Field(description="the field or value it explains, e.g. gamma, role.grounds, calls.cached")
    label: str = Field(
        description="the word or symbol shown in place of the value, e.g. Γ, grounds, cached, states the claim"
    )
    short: str = Field(description="one line a non-specialist reads (at most 120 characters)")
    detail: str = Field(description="a paragraph: how it is measured and what it does not say")
    instruction_label: str | None = Field(
        None,
        description="the label on a source of the instructions layer, where it differs (an instruction directs)",
    )
    value: str | None = Field(
        None,
        description="the value a result carries for this term when the key does not name it (a diagnosis's text)",
    )

    @field_validator("short")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value or len(value) > 120:
            raise ValueError("short is one line of at most 120 characters")
        return value


class GlossaryOut(BaseModel):
    """``GET /v1/glossary``: every term, in the order a reader meets them."""

    model_config = ConfigDict(frozen=True)

    terms: list[Term]


def _t(
    key: str,
    label: str,
    short_text: str,
    detail: str,
    *,
    instruction_label: str | None = None,
    value: str | None = None,
) -> Term:
    return Term(
        key=key,
        label=label,
        short=short_text,
        detail=" ".join(detail.split()),
        instruction_label=instruction_label,
        value=value,
    )


_TERMS: tuple[Term, ...] = (
    # ------------------------------------------------------------------ the scores
    _t(
        "s_all",
        "s(1)",
        "The judge's score for the claim with every source shown.",
        """The score of the claim given the query and every source of the turn's context. With the judged
       estimator it is a digit from 1 (the sources make the claim very unlikely) to 9 (they make it very
       likely); with the log-probability estimators it is log p(claim) in nats. Written s(1) or s(all
       sources).""",
    ),
    _t(
        "s_none",
        "s(0)",
        "The same score with every source removed: what the model says from its own knowledge.",
        """The score of the claim given only the query, every source removed. A high s(0) means the model
       would say the claim without the context (it knew it, or it is a common guess). Written s(0) or
       s(no sources).""",
    ),
    _t(
        "gamma",
        "Γ",
        "How much the context raises the claim's score: s(all sources) − s(no sources).",
        """Γ = s(1) − s(0), the effect of the whole context on the claim. When Γ is below τΓ the claim
       survives the removal of every source, so it is called the model's own knowledge; otherwise the
       layers and sources are tested one by one to find which carry it. Null when one of the two scores
       could not be measured.""",
    ),
    _t(
        "delta",
        "Δ",
        "How far the score falls when this layer or source is removed; a large fall means it carries the claim.",
        """Δ = s(all sources) − s(all sources but this one), measured for each layer (tools, instructions,
       history) and then for each source of a layer that matters. Positive: removing it lowers the score
       (it grounds the claim); negative: removing it raises the score (it distracts); near zero: it makes
       no measurable difference — or another source says the same (see redundant).""",
    ),
    _t(
        "alone",
        "alone",
        "The score with only this source kept (the others of its layer removed).",
        """Asked when removing any single source changes nothing: each source of the grounding layer is
       kept alone, the other layers intact. A source whose score alone stays high carries the claim by
       itself, and is marked redundant.""",
    ),
    _t(
        "repeats",
        "repeats",
        "Samples per measurement: each score is the median of this many calls (default 1: its spread is unknown).",
        """A hosted judge is noisy: asked the same question twice it may answer 6, then 8. With repeats k
       (--repeats k on provenance trace and quote, repeats on the API) every measurement of rounds 1 and 2
       and of redundancy resolution is made k times, each a real call, priced by the quote and counted by
       the plan; the score is the median of the samples and their spread is shown beside it. Span checks
       are made once. With the default, 1, a single sample was taken and how much a score would vary
       between calls is unknown. A judgement cache never answers a repeat with the first sample's
       answer. MAX_CALLS bounds each sample: a trace with repeats k may make up to k × MAX_CALLS calls,
       all of them in the quote before it runs.""",
    ),
    _t(
        "spread",
        "spread",
        "The lowest and highest of a score's samples (repeats): how far the judge's answers varied.",
        """With repeats k > 1 each measurement keeps its k samples (null: a sample that gave no information)
       and their lowest and highest; the score used is their median. A wide spread beside a small drop
       means the drop is within the judge's own noise. Absent when a single sample was taken.""",
    ),
    _t(
        "disagreement",
        "the judge's answers disagree",
        "Two measurements of this trace cannot both be true; the verdict is hedged or withheld.",
        """A noisy judge can answer the masks of one trace inconsistently. Four cases are named, with their
       numbers: removing a part lowers the score by more than removing the whole context (Δ > Γ + τ);
       a distractor that still carries the claim kept alone; a source that carries the claim alone where
       the span check found nothing; a context that carries the claim while no layer's removal lowers it.
       The first downgrades a "model's own knowledge" verdict to no information; the others between scores
       hedge the verdict's text. Measuring each mask several times (repeats) settles most of them.""",
    ),
    _t(
        "tau",
        "τ",
        f"The smallest drop counted as real (default {_P.tau:g} on the judge's 1–9 scale); smaller moves are noise.",
        """A layer's or source's drop Δ counts only when |Δ| ≥ τ. Below it the difference is within the
       judge's quantisation and is read as no effect (irrelevant). For the log-probability estimator the
       threshold is in nats and is set relative to Γ.""",
    ),
    _t(
        "tau_gamma",
        "τΓ",
        f"The smallest Γ counted as the context mattering (default {_P.tau_gamma:g}); below it, the model knew it.",
        """When Γ < τΓ the claim is about as likely without any source as with all of them: the verdict is
       internal knowledge and no source is credited — unless a part's drop exceeds Γ by more than τ, which
       contradicts it: then the judge's answers disagree and no verdict is stated.""",
    ),
    # ------------------------------------------------------------------ roles
    _t(
        "role.grounds",
        ROLE_LABELS["grounds"],
        "Removing it lowers the claim's score by at least τ: it carries the claim.",
        """Its drop Δ is at least τ. For a layer it means the claim depends on something in that layer; for a
       source, on that source. The span check then looks for the sentence in it that says so.""",
    ),
    _t(
        "role.distractor",
        ROLE_LABELS["distractor"],
        "Removing it raises the claim's score by at least τ: it pulls against the claim.",
        """Its drop Δ is at most −τ: with it removed the judge finds the claim more likely. Often a source
       that says something different from the claim, or confuses the judge.""",
    ),
    _t(
        "role.irrelevant",
        ROLE_LABELS["irrelevant"],
        "Removing it moves the score by less than τ: no measurable part in this claim.",
        """|Δ| < τ. It may still say the same thing as another source; if so, removing one changes nothing
       because the other still says it — the redundancy check finds those and marks them redundant.""",
    ),
    _t(
        "role.redundant",
        ROLE_LABELS["redundant"],
        "Removing it changes nothing because another source says the same, but alone it carries the claim.",
        """When several sources carry a claim, removing any one of them changes nothing and every drop reads
       near zero. The trace then keeps one source at a time; those that carry the claim alone are
       redundant: each is enough, none is needed. The same test is made one level up for layers.""",
    ),
    # ------------------------------------------------------------------ verdicts
    _t(
        "verdict.attributed",
        VERDICT_LABELS["attributed"],
        "The context carries the claim and at least one layer's removal lowers its score.",
        """Γ ≥ τΓ and one or more layers ground the claim. The sources of those layers are tested next, and
       the span check quotes the lines that state it.""",
    ),
    _t(
        "verdict.redundant",
        VERDICT_LABELS["redundant"],
        "The context carries the claim, but no single layer is needed: several carry it.",
        """Γ ≥ τΓ, yet removing any one layer changes nothing, because another layer still says it. The
       redundancy check then asks which layers and sources carry the claim alone.""",
    ),
    _t(
        "verdict.internal_knowledge",
        VERDICT_LABELS["internal_knowledge"],
        "The claim survives removing the whole context: the model knew or guessed it.",
        """Γ < τΓ: the score without any source is about the same as with all of them. No source is
       credited. A source may still agree with the claim (the span check says so), but it did not cause
       it.""",
    ),
    _t(
        "verdict.no_information",
        VERDICT_LABELS["no_information"],
        "The measurements could not decide: a score the verdict needs was missing.",
        """A call failed or its answer could not be read, so Γ or a layer's drop is unknown. It is never a
       guess: the warnings name the measurement that is missing.""",
    ),
    # ------------------------------------------------------------------ the span check
    _t(
        "support.supported",
        SUPPORT_LABELS["supported"],
        "The source states the claim (or, for instructions, directs it), with a checked quote.",
        """The span check asked the judge whether this source states the claim and for the lines that do.
       The quote is then found in the source's full text mechanically; one that cannot be found is retried
       once, then downgraded to silent.""",
        instruction_label=INSTRUCTION_SUPPORT_LABELS["supported"],
    ),
    _t(
        "support.contradicted",
        SUPPORT_LABELS["contradicted"],
        "The source says the opposite of the claim, with a checked quote.",
        """The judge found lines in the source that contradict the claim, and the quote was found in the
       source's text. Together with a high drop it suggests the agent misread the source.""",
        instruction_label=INSTRUCTION_SUPPORT_LABELS["contradicted"],
    ),
    _t(
        "support.silent",
        SUPPORT_LABELS["silent"],
        "The source says nothing about the claim (or its quote could not be checked).",
        """Neither stated nor contradicted. A supported or contradicted answer whose quote could not be found
       in the source twice is also shown as silent, marked downgraded.""",
        instruction_label=INSTRUCTION_SUPPORT_LABELS["silent"],
    ),
    _t(
        "support.no_quote",
        "the span check found no quote",
        "It carries the claim by measurement, but the span check found no line of it that states the claim.",
        """Shown instead of the silent label on a source the measurement says carries the claim — its removal
       lowers the score by at least τ (grounds), or kept alone it keeps the score (redundant) — so the card never
       says both "carries the claim" and "says nothing about it". The drop or the score kept alone is the
       evidence; the span check only looks for a verbatim quote, and finds none when the source says it in
       other words, when the value is computed or spread over several lines, or when the judge's quote could
       not be found in the source (downgraded). Compare the sentence with the source by hand.""",
        instruction_label="the span check found no instruction to quote",
    ),
    _t(
        "confidence",
        "confidence",
        "The judge's own rating (0–1) of its span check: a self-report, not a chance of being right.",
        """The number the judge gave with its answer. It is not calibrated and is not the probability that
       the verdict is correct; a downgraded answer's confidence is capped low. The checked quote, not
       this number, is the evidence.""",
    ),
    _t(
        "downgraded",
        "downgraded",
        "The judge quoted text that is not in the source, so its answer is shown as silent.",
        """A supported or contradicted answer whose quote did not match the source's text, twice, is
       downgraded to silent: an unverifiable quote is never shown as evidence.""",
    ),
    # ------------------------------------------------------------------ the §9 diagnosis
    _t(
        "diagnosis.grounded",
        DIAGNOSIS_LABELS[GROUNDED],
        "The source carries the claim and states it.",
        "High attribution (the source's layer carries the claim) and the span check found it stated.",
        value=GROUNDED,
    ),
    _t(
        "diagnosis.misread",
        DIAGNOSIS_LABELS[MISREAD],
        "The source carries the claim but says something else.",
        "High attribution and the span check found the source contradicting the claim: the agent misread it.",
        value=MISREAD,
    ),
    _t(
        "diagnosis.knew_it",
        DIAGNOSIS_LABELS[KNEW_IT],
        "The model would have said it anyway; a source happens to agree.",
        """Γ < τΓ (the claim survives removing the whole context) and the source states the claim: the data
       agrees, but did not cause the sentence.""",
        value=KNEW_IT,
    ),
    _t(
        "diagnosis.overrode",
        DIAGNOSIS_LABELS[OVERRODE],
        "The model said it from its own knowledge, against what a source says.",
        "Γ < τΓ and the source contradicts the claim: the model's own belief won over the data it was given.",
        value=OVERRODE,
    ),
    _t(
        "diagnosis.unverifiable",
        DIAGNOSIS_LABELS[UNVERIFIABLE],
        "The model said it on its own and no source speaks to it.",
        "Γ < τΓ and every source is silent: nothing in the context can confirm or refute the claim.",
        value=UNVERIFIABLE,
    ),
    # ------------------------------------------------------------------ calls and cost
    _t(
        "calls.planned",
        "planned",
        "The cost gate's worst case: the most calls this trace may send, reserved from the budget.",
        """Counted before anything is spent, from the number of sources and the rounds. The quoted cost is
       for these calls; a trace usually sends fewer, and what it did not send is released.""",
    ),
    _t(
        "calls.made",
        "made",
        "Requests sent to the model provider, each retry one more, failed ones included; cache answers are not.",
        """Every HTTP request that left for the provider (judge, span check, probe or scoring): a call retried
       after a 429, a 5xx or a timeout, or asked again without a format the provider rejected, is made once per
       request, since the provider received (and may charge for) each. Made never exceeds planned — a retry
       over the plan is refused unsent — and the budget keeps exactly what was made. A call answered from the
       judgement cache never left, so it is counted as cached instead.""",
    ),
    _t(
        "calls.cached",
        "cached",
        "Measurements answered from the judgement cache: not sent, not billed, $0.",
        """The same prompt was judged before (by this tenant, for this turn) and its answer was kept, so it
       was reused instead of sent. Cached answers cost nothing.""",
    ),
    _t(
        "calls.billed",
        "billed",
        "Calls the provider charged for: the answered ones, plus failed ones it still billed.",
        """The cost reported is for these calls: their tokens at the judge's price (the operator's
       PROVENANCE_MODEL_PRICES, else litellm's price map) — the tokens the provider reported, or, when it
       reported none, the tokens counted from the request as sent and the answer (estimated). A call in flight
       when the service stopped is counted as billed at its estimated cost, since the provider may have
       answered it.""",
    ),
    _t(
        "calls.failed",
        "failed",
        "Sent requests that failed (an error, a timeout, an unreadable answer), each retried one counted.",
        """A failed call is no information, never a score. A trace whose every call failed is reported as a
       failure with its cause, never as a result.""",
    ),
    _t(
        "estimated",
        "estimated",
        "Tokens counted by the service from what was sent, because the provider reported none; billed at its price.",
        """A provider that answers without usage still charges. Such a call is billed at the tokens of its
       request as sent (cl100k_base, with each message's overhead) and of its answer, at the model's price,
       and is marked estimated (usage.estimated on a result, estimated on each call). A call in flight when
       the service stopped is estimated too: its request's tokens and its answer's token cap.""",
    ),
    _t(
        "calls.saved",
        "reused",
        "Measurements reused within this trace: asked before in the same trace, so not calls, never billed.",
        """Two rounds sometimes ask the same question (the same sources removed); the second reuses the
       answer this trace already has (its own record of what it measured). It is never a call, never billed, and
       not part of made or cached (the judgement cache, which keeps answers across traces, is cached).""",
    ),
    # ------------------------------------------------------------------ warnings
    _t(
        "warning.truncated",
        "cut context",
        "Part of the context was cut before scoring; the sentence may come from the part that was cut.",
        """Each source is scored within a token window (and span-checked within another), and history is cut
       by message count and size. Evidence past a cut is invisible to every measurement: the sources named are
       the best among the part that was scored. On the hard validity set a cause past the cut was never
       recognised as such, so the result says so (the warning starting "Part of this context was cut") and
       names the cut sources — read them in full before relying on the result.""",
    ),
    _t(
        "warning.lookalike",
        "shared carriers",
        "Several sources say what the sentence says; the estimator cannot tell which one the answer followed.",
        """A layer moves the sentence but none of its sources does on its own: they share its content — the same
       record twice, or look-alike records with the same ids, dates and amounts that differ in one field.
       Removing one leaves the others, so no single drop reaches τ. On the hard validity set look-alikes were
       never told apart from the cause; the warning (starting "No single source of") names the sources to
       compare with the sentence by hand.""",
    ),
    _t(
        "warning.paraphrase",
        "reworded source",
        "Called the model's own knowledge, but narrowly: the sentence may reword a source.",
        """A long sentence that restates a source in other words gains less from the context than τ_Γ, which
       grows with its length, so it can read as internal knowledge. When Γ is under τ_Γ but over half of it,
       the result says so (the warning starting "Reported as the model's own knowledge, but narrowly"). The
       span check, too, quotes only word-for-word lines, so a reworded source may carry a real drop but no
       quote.""",
    ),
    # ------------------------------------------------------------------ estimators
    _t(
        "estimator.judged",
        "judged",
        "A judge model reads the sources and rates how likely the claim is, 1–9.",
        """Any chat model can judge. Each measurement is one call that answers a single digit; an answer that
       is not exactly one digit is no information, never a guess.""",
    ),
    _t(
        "estimator.expected",
        "expected digit",
        "The judge's average digit, weighted by its own probabilities for 1–9.",
        """The same judge call, read from the model's top log-probabilities instead of the one digit it wrote:
       a finer score where the provider offers them (OpenAI, vLLM, a llama.cpp server, the local model).""",
    ),
    _t(
        "estimator.logprob",
        "log-probability",
        "How probable a scoring model finds the claim's exact words, in nats.",
        """log p(claim | query, sources) from a model that can score text (a local model, or a self-hosted
       server's /v1/completions with echo). Scores and drops are in nats, not digits.""",
    ),
    _t(
        "estimator.both",
        "both",
        "The judged digit and the log-probability, run side by side, with how far they agree.",
        """Both estimators trace the same claim; the result shows each tree and their agreement: the same
       verdict, the same top layer and source, and the rank correlation of the sources' drops.""",
    ),
    _t(
        "estimator.proxy",
        "proxy",
        "A free local model ranks the sources; the hosted judge confirms the top ones.",
        """The log-probability leave-one-out runs on a local scoring model, then the hosted judge measures
       Γ and the top layer and source; if they disagree, the full judged search runs and the result says
       so.""",
    ),
    # ------------------------------------------------------------------ a proxy-first trace
    _t(
        "calls.scored",
        "scored",
        "Local scoring passes of a proxy trace: free, never billed, and not counted in made.",
        """Each pass asks the proxy's scoring model (a local model, or a scoring server of your own) how
       probable the claim's exact words are with some sources removed: the log-probability leave-one-out.
       They cost no money and never reach the hosted provider, so they are counted apart from the hosted
       calls: planned, made, cached and billed count the hosted judge's calls only.""",
    ),
    _t(
        "proxy.confirmed",
        "confirmed",
        "The hosted judge agreed with the proxy's ranking: its checks fell where the proxy said, within the margin.",
        """The hosted judge measured s(1) and s(0) (so Γ), the drop when the proxy's top layer is removed and
       the drop when its top source is removed (when the proxy found no single layer matters: the drop
       when each layer is removed), and span-checked the top source. Confirmed means each of these agrees
       with the proxy: Γ on the same side of τΓ as the proxy's verdict, the top layer with the proxy's role
       for it (every layer's drop under τ, when the proxy found none matters), the top source with a drop of
       at least τ, and the share of Γ the top source carries no more than the share margin below the
       proxy's. The scores shown are then the proxy's (nats)
       and the span check is the judge's.""",
    ),
    _t(
        "proxy.fallback",
        "fallback",
        "The hosted judge disagreed, so the full judged search ran; its result stands unless its answers contradict.",
        """At least one of the judge's checks (Γ, the top layer's drop, the top source's drop or its share of Γ)
       did not agree with the proxy's ranking; the reasons are listed. The full judged search then ran
       (reusing the checks already made) and its verdict, tree and digits are the result. The proxy's ranking
       is shown beside it, for comparison only. One exception: when the judged search's own measurements
       contradict each other (a part that matters more than the whole, a distractor that carries the claim
       alone) while the proxy's ranking is consistent, answers that cannot all be true do not overrule it:
       the result is the proxy's ranking, unconfirmed, with the judge's contradictions listed and its ranking
       shown beside it.""",
    ),
    _t(
        "proxy.share_margin",
        "share margin",
        "How much smaller a share of Γ the judge may give the proxy's top source before the two disagree.",
        f"""The proxy's top source carries a share of Γ for the proxy (its drop over Γ, in nats) and a share for
       the hosted judge (its drop over the judge's Γ, in digits). The proxy is confirmed only when the
       judge's share is at most this margin below the proxy's (default {_PP.share_margin:g} of Γ). The
       judge's digits are coarse, so a smaller share still names the same source; a much smaller one is a
       different ranking.""",
    ),
    _t(
        "proxy.drops",
        "nats vs digits",
        "The proxy's drops are in nats, the judge's in digits 1–9: compare their order and sign, not their size.",
        """A drop Δ is how far the claim's score falls when a source is removed. The proxy measures log
       p(claim) in nats; the hosted judge answers a digit from 1 to 9. The two scales do not convert into each
       other, so a source ranks the same when it comes first (with the same sign) in both, whatever the
       numbers. "Not measured" means that side did not remove this source: the judge checks only the proxy's
       top source unless the full search ran.""",
    ),
    _t(
        "proxy.seconds",
        "proxy seconds",
        "Wall time of the proxy's ranking on the local scoring model (the hosted calls are not included).",
        """Measured around the local scoring passes only. It depends on the machine and on what else runs on
       it; the quote estimated it beforehand from the prompt tokens to evaluate.""",
    ),
    _t(
        "proxy.evaluated_tokens",
        "evaluated tokens",
        "Prompt tokens the local scorer actually evaluated; reusing a shared prompt prefix saves the rest.",
        """Successive scoring passes share the start of their prompts, and a scorer that keeps it evaluates
       only what changed. Shown when the scorer reports it; a remote scoring endpoint may not.""",
    ),
    # ------------------------------------------------------------------ sources
    _t(
        "tool_error",
        "tool error",
        "A source that is a failed or denied tool call's error text: what the agent was told went wrong.",
        """The call's own error text (a timeout, "the 12:00 slot is already taken", a denial) is what the agent
       read next, so it can cause the sentences and actions after it. Its kind is tool_error and its label ends
       "— failed" (or "— denied"); in a later turn's history it is labelled "tool error". A failed call that
       left no text is not a source and is listed as excluded, with its reason. With
       params.failed_calls_as_sources=false every failed call is excluded, as the paper's Algorithm 1 does.""",
    ),
    _t(
        "instructions_rule",
        "instructions rule",
        "A source that is one rule (section) of the agent's system prompt, with its lines in the prompt.",
        """The system prompt is split where its author structured it (headings, list items, paragraphs) and each
       part is a source of the instructions layer, labelled instructions §N "heading" · prompt lines a–b, so a
       trace names the rule that directs a sentence; line n of its text is line a + n − 1 of the prompt. Small
       neighbouring sections are merged (at most two thirds of MAX_SOURCES rules) and a section larger than the
       scoring window is split between its items. With params.instructions_as_rules=false the prompt is one source,
       as the paper's Algorithm 1 keeps it.""",
    ),
    # ------------------------------------------------------------------ actions (what the agent did)
    _t(
        "action",
        "action",
        "A tool call the agent made in the turn (a0, a1, … in order), traced like a sentence.",
        """Every call of the current turn is an action. Its context is what the agent had seen when it made the
       call: the system prompt, the history, the query, and only the tool returns that came back before it — a
       later return, the call's own result included, can never have caused it. A sentence that reports an
       action ("I have transferred …") lists it in reported_by, so a reader goes from the sentence to the
       action to its cause.""",
    ),
    _t(
        "argument_source",
        "argument provenance",
        "Where an argument value first appears in what the agent could read: source, lines, quote; or nowhere.",
        """Each value the call sent (nested arguments walked) is looked up, whole, in the order the agent
       received its context: the system prompt, the conversation (all of it, also past the history layer's
       cap: history:<n>), the query, the tool returns before the call. Numbers match however written (1000,
       1,000, 1000.00); text ignores case and spacing; a value is never found inside a longer one. None
       means the agent made it up or computed it. Booleans, small numbers and very short words are skipped.""",
    ),
    _t(
        "origin.user",
        "from the user",
        "Every decisive value of the call is in the user's request or the earlier conversation.",
        """A decisive value identifies something (an account, an amount, an address, an id); long free text the
       agent wrote is not counted.""",
    ),
    _t(
        "origin.instructions",
        "from the instructions",
        "A decisive value of the call appears only in the agent's system prompt.",
        """Not in the user's words nor in the conversation: the operator's own rules supplied it.""",
    ),
    _t(
        "origin.data",
        "from tool data",
        "A decisive value of the call appears only in tool returns: the agent acted on what a tool gave it.",
        """Common and often right (a flight number from a search); it is also how an instruction hidden in data
       reaches an action, which the steered-by-data screen looks for.""",
    ),
    _t(
        "origin.invented",
        "invented",
        "A decisive value of the call appears nowhere the agent could read: it made it up or computed it.",
        """A date the agent normalised, a sum it computed, an airport code it inferred — or a value it
       hallucinated. The value is listed with no source.""",
    ),
    _t(
        "suspect_injection",
        "steered by tool data",
        "A tool return addressed the agent with an instruction, and this action did what it said.",
        """The free screen: a return the action could read holds text aimed at the agent (it addresses the
       model, says to ignore its instructions, fakes a system note, comes before the user's task, keeps
       something from the user; or two of: an order to act, "you must", urgency, claimed authority), and near
       it a decisive value the action sent or the action's tool — which the user's own words do not ask for.
       The source, its lines and the instruction are quoted. A screen, not a verdict: trace the action to
       measure it.""",
    ),
    _t(
        "injection",
        "injection (measured)",
        "A trace of an action: whether a tool return that gives the agent instructions grounds the call.",
        """Suspected when a tool return holding text aimed at the agent (the screen's cues) grounds the call by
       measurement — removing it drops the call's score by at least τ, or it carries the call alone — and the
       user's own words do not name the tool with every decisive value it sent. The source, the instruction's
       lines (the span check's verified quote when it has one) and the drop are given; "screened" says what
       the free screen had said, and a screen finding the trace does not bear out is said so in words.""",
    ),
    # ------------------------------------------------------------------ custody (where evidence came from, its age)
    _t(
        "envelope",
        "evidence envelope",
        "Where a source came from and what was done to it, as the history recorded it.",
        """Every source carries one: the producing tool (and the MCP server and resource when the history names
       them), when its content was observed (observed_at), the principal, tenant and scope it was fetched for,
       the sha256 digest of its raw content, the transformations made before the model saw it, the sources it
       was derived from (a rule of the system prompt is derived from the whole prompt) and its custody. A
       field the history did not carry reads "not recorded": nothing is guessed.""",
    ),
    _t(
        "custody",
        "custody",
        "Who kept the record of a source: the stored history (history) or a gateway that saw it pass (gateway).",
        """A source read from a stored history has custody "history": its times, principal and digest are what
       the agent's platform wrote down. A source a gateway recorded as it passed has custody "gateway".""",
    ),
    _t(
        "not_recorded",
        "not recorded",
        "The history does not carry this (a time, a principal, a server): it is left empty, never guessed.",
        """Each history format carries different fields (the README's table): pydantic-ai parts have
       timestamps, OpenTelemetry tool spans their end times and attributes, LangChain message dicts and
       AgentDojo runs none. An age or a freshness rule that needs a missing time says so.""",
    ),
    _t(
        "age",
        "age",
        "How old a source was when the answer (or the action) was produced: that moment minus its observed_at.",
        """Shown beside each source when both times are recorded (12 s, 3 min 20 s); "not recorded" says which
       time is missing. A negative age — a source observed after the moment — is shown as it is (a clock
       skew, or a return read after the answer).""",
    ),
    _t(
        "freshness",
        "freshness rule",
        "An operator's rule: an action needs evidence from a tool no older than a limit (same principal, lossless).",
        """Set in a TOML or JSON file (PROVENANCE_FRESHNESS_RULES or provenance gate --freshness-rules): "a
       send_money call needs evidence from get_balance no older than 30 s, from the same principal, with no
       lossy transformation". Checked on every gate and trace of an action over what the agent had read when
       it made the call. Without rules, ages are shown and nothing is judged.""",
    ),
    _t(
        "freshness.pass",
        "pass",
        "A source from the evidence tool met every condition of the rule when the action was made.",
        """The finding names the source that met it and its age when the action was made, so a reader can check the
        rule's conditions against the envelope.""",
    ),
    _t(
        "freshness.breach",
        "breach",
        "No source from the evidence tool met the rule: too old, another principal, lossy, or none read at all.",
        """The finding names the rule, the source judged (the freshest from the evidence tool; none when the
       agent had read nothing from it), its age and each condition it failed.""",
    ),
    _t(
        "freshness.not_checkable",
        "not checkable",
        "The rule could not be checked: a time (or a principal the rule asks about) is not recorded.",
        """Said when no source fails the rule outright but the history lacks what the check needs — "no
       timestamps" when the source's or the action's time is missing. Never read as a pass.""",
    ),
    # ------------------------------------------------------------------ the MCP evidence gateway (custody)
    _t(
        "custody.gateway",
        "custody verified by the gateway",
        "This tool return matches, by digest, a result the MCP gateway recorded as it relayed it.",
        """provenance gateway runs between the agent and its MCP server and records every tools/call result it
       relays: the server, the tool, a digest of the arguments, when it arrived (the gateway's clock) and who ran
       the gateway (its own configuration, never the model). A return of an imported turn whose text has the same
       sha-256 is bound to that record: the server did send this text. It says nothing of whether the text is
       true.""",
    ),
    _t(
        "custody.history",
        "as reported by the agent's history",
        "No gateway record matches this tool return: it is as the agent's stored history reports it.",
        """No result the gateway recorded for the tenant has this return's digest: the gateway did not relay it,
       or the history holds it changed (edited, cut, re-serialised). The return is still a source; only its
       custody rests on the history alone.""",
    ),
    # ------------------------------------------------------------------ imports (history into stored turns)
    _t(
        "import.rejected",
        "rejected",
        "Not imported: a line, conversation or turn that cannot be read or stored, named with where and why.",
        """A line that is not UTF-8 or not JSON, a conversation no importer can read, a turn over the size limit
       (PROVENANCE_MAX_BODY_BYTES, the same on the API and the command line) or nested too deeply. The rest of
       the input is imported. Rejections, and conflicts with stored turns, make provenance import exit 1.""",
    ),
    _t(
        "import.warnings",
        "warnings",
        "Imported, but not in full or not as written: e.g. an image named instead of inlined.",
        """Something the importer read only in part — an image or file named instead of inlined, a part of a
       kind it does not know passed over. The turns are stored and the import succeeds (exit 0); each warning
       says where it is and what was left out, apart from the rejections.""",
    ),
    _t(
        "import.noted",
        "noted",
        "Read, but no turn: e.g. a conversation that ends on a tool call with no reply after it.",
        """A conversation with no assistant reply to trace gives no stored turn; it is noted, not rejected, and
       fails nothing. Notes also say how a history store was read when that matters (a write-ahead log left
       unread).""",
    ),
    # ------------------------------------------------------------------ the custody log
    _t(
        "audit.custody_log",
        "custody log",
        "Each tenant's stored turns, trace results and deletions, chained by hash in the order they happened.",
        """Every stored turn (its digest and each source's digest), every stored trace result (the digest of its
       JSON) and every deleted turn is a record of the tenant's custody log, written in the same transaction,
       each carrying the hash of the record before it. A later edit, deletion or reordering of what is stored
       no longer matches the chain; provenance audit verify and GET /v1/admin/audit/verify walk it.""",
    ),
    _t(
        "audit.intact",
        "intact",
        "Every record chains to the one before it and every covered turn and result is as recorded.",
        """The walk found every record in order, each naming the hash of the one before it and still giving its
       own, and every stored turn and result the log covers has the digest its record attested. It does not
       prove the chain was never rewritten whole by someone with write access to the database: compare the
       head hash with one kept elsewhere.""",
    ),
    _t(
        "audit.broken",
        "broken",
        "The first record where the log and what is stored disagree: its place, its subject and what differs.",
        """A record altered, removed or out of order; a stored turn or result that no longer has the digest
       its record attested (the sources that differ are named); a covered row gone without a deletion record;
       or a row stored after the log began that no record covers. Exit status 1.""",
    ),
    _t(
        "audit.not_chained",
        "not chained (stored before the log)",
        "Turns and results stored before the tenant's log began: not covered by it, and not a break.",
        """The first record of a tenant's log says how far its turns and results reached when the log began;
       rows up to there have no records and are counted, never taken for tampering. Rows stored after it
       without a record are a break.""",
    ),
    _t(
        "audit.head",
        "head",
        "The newest record's place and hash: it depends on every record before it. Keep a copy elsewhere.",
        """An operator with write access to the database could rewrite the whole chain consistently; a head
       hash exported where they cannot write (a ticket, a log service, another system) shows whether the
       chain that ends in it is still the one stored.""",
    ),
    _t(
        "redacted",
        "[redacted:NAME]",
        "A value the operator's redaction patterns replaced before the turn was stored; it was never kept.",
        """PROVENANCE_REDACT_PATTERNS names patterns (API keys, card numbers with a Luhn check, bearer tokens, or
       the operator's own) whose matches are replaced by [redacted:NAME] on the same line before a turn is
       stored, so line spans stay valid and every digest is of the redacted text. The turn's metadata
       (provenance_redacted) says how many values each source had replaced, never what they were.""",
    ),
)


def _more_terms(known: tuple[Term, ...]) -> tuple[Term, ...]:
    """The states of a job, a sentence, a probe and a declared credit, and each parameter of ``Params`` not
    explained above under its own name (``glossary_words``), its default and range read from ``Params``."""
    keys = {t.key for t in known}
    states = tuple(_t(*row) for row in STATE_TERMS)
    params = tuple(
        _t(f"params.{name}", name, short_text, f"{detail} {param_bounds(field)}.")
        for name, field in Params.model_fields.items()
        if name not in keys and name in PARAM_WORDS
        for short_text, detail in (PARAM_WORDS[name],)
    )
    return states + params


_TERMS += _more_terms(_TERMS)

GLOSSARY: dict[str, Term] = {term.key: term for term in _TERMS}


def glossary_out() -> GlossaryOut:
    return GlossaryOut(terms=list(_TERMS))


def label(key: str, *, instructions: bool = False) -> str:
    """The word shown in place of ``key``'s value (on an instruction source, its instruction label where it
    has one); KeyError for an unknown key."""
    term = GLOSSARY[key]
    return (term.instruction_label or term.label) if instructions else term.label


def diagnosis_label(diagnosis: str) -> str:
    """A diagnosis the estimator returned, as a reader is shown it (itself when no term names it)."""
    return next((t.label for t in _TERMS if t.value == diagnosis), diagnosis)


def short(key: str) -> str:
    """The one-line explanation of ``key`` (KeyError for an unknown key: every key used must exist)."""
    return GLOSSARY[key].short


def _norm(text: str) -> str:
    return " ".join(text.casefold().replace("_", " ").replace("-", " ").split())


def find(word: str) -> list[Term]:
    """The terms ``word`` names: its key, the key's last part (``grounds`` → role.grounds), its label, the
    value it explains, or a word of the key or label; in glossary order."""
    wanted = _norm(word)
    exact = [
        t
        for t in _TERMS
        if wanted in (_norm(t.key), _norm(t.key.rsplit(".", 1)[-1]), _norm(t.label), _norm(t.value or ""))
    ]
    if exact:
        return exact
    return [t for t in _TERMS if wanted in _norm(t.key) or wanted in _norm(t.label)]
