"""Declared attribution (seed §2.4, "declared citation") and the cross-source conflation audit.

A sentence may credit a source explicitly: "according to your reservation details", "the search
results show", "per our policy", "as you said earlier", a marker like ``[1]`` or ``【…】``, a tool
name, a file path, a URL. ``declared_refs`` finds those credits and resolves each to the corpus
sources it names (by tool name, path, URL, file name or label words) or to the source kinds it
names (an account record, the policy, the conversation). ``audit_declared`` then compares the
credited sources with the ones that verifiably ground the claim:

* ``consistent`` — a credited source is among the grounding ones;
* ``conflated`` — the claim is grounded, but by a different source than the one credited;
* ``unsupported_citation`` — a source is credited and nothing grounds the claim;
* ``none_declared`` — the sentence credits no source.

With the system prompt split into its rules (``Params.instructions_as_rules``), a credit of the instructions ("per
our policy", "I'm instructed to") names the rule that directs the sentence — the rule whose statements carry the
most of the sentence's content words (``free_tier.restates``) — not every rule of the prompt.

Weak cues (a path, file name, URL or tool name in passing, "the X shows", "from the X") count only
when they name a real source of the turn, so a sentence that merely mentions a file ("I could not
read the attached survey.xlsx") is not read as a credit. Strong cues ("according to …", "per the
…", "as stated in …", "you said", markers) count even when they name nothing in the context:
crediting a source the agent never saw is itself a misattribution.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import regex

from estimator.corpus.units import Corpus, Layer, Unit
from estimator.free_tier.restates import RuleIndex
from estimator.results.models import DeclaredAuditModel, DeclaredRefModel, RefKind
from estimator.spans.verify import normalise

# Source kinds a phrase can name, by the words that name them (stemmed, lower case).
ALIASES: Mapping[str, str] = {
    **dict.fromkeys(("account", "user", "customer", "member", "membership", "profile", "client", "patient"), "account"),
    "record": "record",
    **dict.fromkeys(("reservation", "booking", "trip", "itinerary"), "reservation"),
    **dict.fromkeys(("order", "purchase"), "order"),
    **dict.fromkeys(
        ("policy", "rule", "guideline", "term", "condition", "instruction", "prompt", "regulation"), "policy"
    ),
    **dict.fromkeys(("help", "faq", "article", "knowledge"), "help"),
    **dict.fromkeys(("search", "result", "listing"), "search"),
    **dict.fromkeys(("file", "spreadsheet", "csv", "document", "sheet", "dataset", "table"), "file"),
    **dict.fromkeys(("page", "website", "site", "web", "link", "url"), "web"),
    **dict.fromkeys(("conversation", "chat", "earlier", "previously"), "history"),
}
_CREDITS = frozenset(w for w, kind in ALIASES.items() if kind == "policy") | {"instructed", "told"}
# Words of a tool name that name a kind of source.
_TOOL_KINDS: tuple[tuple[frozenset[str], tuple[str, ...]], ...] = (
    (frozenset({"account", "user", "customer", "member", "client", "patient"}), ("account", "record")),
    (frozenset({"reservation", "booking", "trip", "itinerary"}), ("reservation", "record")),
    (frozenset({"order", "purchase"}), ("order", "record")),
    (frozenset({"policy", "help", "faq", "term", "guideline", "article", "kb", "knowledge"}), ("policy", "help")),
    (frozenset({"search"}), ("search",)),
)
GENERIC: frozenset[str] = frozenset(
    {
        "the",
        "a",
        "an",
        "your",
        "our",
        "my",
        "their",
        "his",
        "her",
        "this",
        "that",
        "these",
        "those",
        "of",
        "for",
        "in",
        "on",
        "to",
        "from",
        "with",
        "and",
        "or",
        "by",
        "at",
        "as",
        "is",
        "it",
        "its",
        "get",
        "lookup",
        "look",
        "up",
        "fetch",
        "list",
        "read",
        "find",
        "query",
        "create",
        "update",
        "call",
        "tool",
        "id",
        "data",
        "info",
        "information",
        "detail",
        "said",
        "replied",
        "ago",
        "agent",
        "latest",
        "current",
        "above",
        "below",
    }
)
_STOP_AT: frozenset[str] = frozenset(
    {
        "is",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "must",
        "does",
        "do",
        "did",
        "that",
        "which",
        "who",
        "where",
        "when",
        "there",
        "it",
        "i",
        "we",
        "you",
        "he",
        "she",
        "they",
        "not",
        "so",
        "but",
        "because",
        "if",
        "then",
        "says",
        "shows",
        "states",
    }
)
_DET = r"(?:the|your|our|my|this|that|these|those)"
_VERBS = (
    r"(?:says|said|shows|showed|show|states|stated|lists|listed|list|indicates|indicated|confirms|"
    r"confirmed|confirm|reports|reported|notes|noted|mentions|mentioned|records|recorded|specifies|"
    r"specified|reads|returned|returns|gives|gave|puts|put)"
)
_PHRASE = r"(?:[^\n,;:!?()]|[:?](?=[/\w]))+"  # up to a clause mark; a URL's ":" and "?" do not end it
_OBJ = r"(?P<obj>" + _PHRASE + ")"
# (pattern, strong?) — the object phrase names the credited source.
CUES: tuple[tuple[regex.Pattern[str], bool], ...] = (
    (regex.compile(r"(?i)\baccording to " + _OBJ), True),
    (
        regex.compile(
            r"(?i)\b(?:as )?(?:stated|shown|noted|listed|described|mentioned|specified|indicated|"
            r"recorded|written|set out|laid out|given|confirmed) (?:in|by|on) " + _OBJ
        ),
        True,
    ),
    (regex.compile(r"(?i)\bper (?P<obj>" + _DET + r" " + _PHRASE + ")"), True),
    (regex.compile(r"(?i)\bper (?P<obj>[a-z]" + _PHRASE + ")"), False),  # "per reservation X"; not "per day"
    (
        regex.compile(
            r"(?i)\b(?:based on|drawn from|taken from|sourced from|citing|cited in|quoting|"
            r"comes? from|came from) " + _OBJ
        ),
        True,
    ),
    (regex.compile(r"(?i)\b(?P<obj>" + _DET + r"\s+(?:[\w./:-]+\s+){0,4}?[\w./:-]+)\s+" + _VERBS + r"\b"), False),
    (regex.compile(r"(?i)\b(?:from|in|on|under) (?P<obj>" + _DET + r" " + _PHRASE + ")"), False),
)
HISTORY_CUES: tuple[tuple[regex.Pattern[str], str], ...] = (
    (
        regex.compile(
            r"(?i)\b(?:as )?you(?:'ve| have)? (?:said|mentioned|told me|wrote|stated|noted|indicated|"
            r"explained|confirmed)\b"
        ),
        "user_said",
    ),
    (
        regex.compile(
            r"\b(?:[Aa]s )?I(?:'ve| have)? (?:said|mentioned|noted|told you|explained|wrote|"
            r"confirmed) (?:earlier|before|previously)\b|"
            r"\b[Aa]s I (?:said|mentioned|noted|explained)\b"
        ),
        "agent_said",
    ),
    (
        regex.compile(
            r"(?i)\b(?:earlier|previously) in (?:this|our|the) conversation\b|"
            r"\bour (?:earlier|previous) (?:conversation|exchange)\b"
        ),
        "history",
    ),
    (
        regex.compile(r"\bI(?:'m| am) (?:instructed|required by my instructions|told by my instructions)\b"),
        "instructions",
    ),
)
MARKER = regex.compile(r"\[\^?(?P<n>\d{1,3})\]|\[(?P<sid>s\d{1,4})\]|【(?P<inner>[^】\n]{1,160})】")
URL = regex.compile(r"https?://[^\s)\]>\"'`]+")
PATH = regex.compile(r"\b[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.*+-]+)+")
FILE_NAME = regex.compile(
    r"\b[\w-]+(?:\.[\w-]+)*\.(?:csv|tsv|json|jsonl|md|txt|pdf|xlsx?|docx?|pptx?|py|"
    r"ya?ml|xml|html?|nc|tiff?|h5|hdf|parquet|zip|log|ipynb)\b",
    regex.IGNORECASE,
)
_IDENTIFIERS: tuple[tuple[regex.Pattern[str], RefKind], ...] = ((URL, "url"), (PATH, "path"), (FILE_NAME, "file_name"))
# A disclaimer of use ("I did not use …", "nothing is drawn from …"), not a negative claim ("no fee per …").
_NEGATION = regex.compile(
    r"(?i)(?:\b(?:not|no|nothing|never|none|neither|nor|without)\b|n't\b)(?:\s+[\w']+){0,3}?\s+"
    r"(?:use|used|using|read|draw|drawn|take|taken|base|based|rely|relied|consult|consulted|check|checked|"
    r"open|opened|access|accessed|come|comes|came|cite|cited)\b[^,;:.!?]*$"
)
_PRONOUNS: frozenset[str] = frozenset({"it", "this", "that", "them", "these", "those", "there", "here", "which"})
_WORD = regex.compile(r"[a-z0-9]+")
_FILE_EXT = regex.compile(r"\.[a-z0-9]{1,5}\b")


def stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def words(text: str) -> set[str]:
    """Stemmed content words of a phrase or a tool name (underscores, dots and slashes split)."""
    return {stem(w) for w in _WORD.findall(text.lower().replace("_", " "))} - GENERIC


@dataclass(frozen=True)
class _Profile:
    unit: Unit
    call: str
    descriptor: str
    tags: frozenset[str]
    kinds: frozenset[str]  # the tags that name what the source IS (tool-name words and source kinds)


def _profile(unit: Unit) -> _Profile:
    lines = unit.header.split("\n")
    call, header = "", ""
    if unit.layer == Layer.TOOLS:
        call, header = unit.tool, lines[0]
    elif unit.layer == Layer.HISTORY and unit.tool == "tool":
        parts = unit.label.split(" · ")
        call = parts[1] if len(parts) > 2 else ""
        header = lines[1] if len(lines) > 1 else ""
    descriptor = normalise(unit.label + "\n" + header)
    tags: set[str] = set()
    call_words = words(call)
    if unit.layer == Layer.INSTRUCTIONS:
        call_words = words(unit.label)
        tags |= call_words | {"@policy", "@instructions"}
    elif unit.layer == Layer.HISTORY and unit.tool != "tool":
        tags |= {"@history", "@user_said" if unit.tool == "user" else "@agent_said"}
    else:
        tags |= call_words | words(unit.label) | words(header)
        for names, named in _TOOL_KINDS:
            if call_words & names:
                tags |= {"@" + k for k in named}
        if unit.kind == "web_search":
            tags.add("@search")
        if unit.kind == "web_fetch" or "http" in descriptor:
            tags.add("@web")
        if unit.kind == "artifact_read" or _FILE_EXT.search(descriptor):
            tags.add("@file")
        if unit.layer == Layer.HISTORY:
            tags.add("@history")
    kinds = call_words | {t for t in tags if t.startswith("@")}
    return _Profile(unit, call, descriptor, frozenset(tags), frozenset(kinds))


def _phrase_tags(phrase: str) -> set[str]:
    found = words(phrase)
    return found | {"@" + ALIASES[w] for w in found if w in ALIASES}


def _object(text: str) -> str:
    """The credited noun phrase: the cue's object, cut at the first clause word (at most 7 words)."""
    kept: list[str] = []
    for token in text.split():
        bare = token.strip(".'\"`*").lower()
        if kept and (bare in _STOP_AT or len(kept) >= 7):
            break
        kept.append(token)
        if token.endswith("."):
            break
    return " ".join(kept).rstrip(".")


class _Resolver:
    def __init__(self, corpus: Corpus, sentence: str = "") -> None:
        self.profiles = tuple(_profile(u) for u in corpus.units)
        self.ids = {u.id for u in corpus.units}
        self.tools = tuple(u for u in corpus.units if u.layer == Layer.TOOLS)
        # the words that name the instructions ("per our policy") say nothing of which rule
        self.sentence = " ".join(w for w in sentence.split() if stem(w.strip(".,;:!?'\"()").lower()) not in _CREDITS)
        self.instructions = frozenset(u.id for u in corpus.in_layer(Layer.INSTRUCTIONS))
        self.order = {u.id: n for n, u in enumerate(corpus.units)}
        self._rules = RuleIndex.of(corpus)

    def by_tags(self, tags: set[str], *, weak: bool = False) -> tuple[str, ...]:
        """The best-matching sources. A weak cue must name what the source is (a tool-name word or a
        source kind), not merely share an argument word with it ("from the JFK terminal"). Several rules of the
        instructions that match alike are narrowed to the rule the sentence restates (``directing_rules``)."""
        pool = [p for p in self.profiles if not weak or tags & p.kinds]
        scores = [(len(tags & p.tags), p.unit.id) for p in pool]
        best = max((s for s, _ in scores), default=0)
        return self.directing_rules(tuple(uid for s, uid in scores if best and s == best))

    def directing_rules(self, ids: tuple[str, ...]) -> tuple[str, ...]:
        """``ids`` with the instructions they name, when the prompt is split into rules, replaced by the rule(s)
        whose statements carry the most of the sentence's content words: "per our policy, a full refund is not
        available after 24 hours" credits the cancellation rule, not every rule (nor the one whose heading says
        "policy"). Kept as they are when no rule shares a content word with the sentence."""
        if len(self.instructions) < 2 or not self.instructions & set(ids):
            return ids
        rules = {m.source_id: m.score for m in self._rules.matches(self.sentence)}
        if not rules:
            return ids
        top = max(rules.values())
        kept = [i for i in ids if i not in self.instructions]
        return tuple(sorted([*kept, *(i for i, score in rules.items() if score == top)], key=self.order.__getitem__))

    def families(self, tags: set[str], ids: tuple[str, ...]) -> tuple[str, ...]:
        """The source kinds a phrase names, as far as the sources it resolved to carry them."""
        named = {t for t in tags if t.startswith("@")}
        if ids:
            named &= set().union(*(p.tags for p in self.profiles if p.unit.id in ids))
        return tuple(sorted(t[1:] for t in named))

    def by_descriptor(self, token: str) -> tuple[str, ...]:
        needle = normalise(token).rstrip("/")
        return tuple(p.unit.id for p in self.profiles if needle and needle in p.descriptor)

    def by_marker(self, match: regex.Match[str]) -> tuple[str, ...]:
        if match.group("sid"):
            return (match.group("sid"),) if match.group("sid") in self.ids else ()
        if match.group("n"):
            marker = f"[{match.group('n')}]"
            holding = tuple(p.unit.id for p in self.profiles if p.call and marker in p.unit.text)
            n = int(match.group("n"))
            return holding or ((self.tools[n - 1].id,) if 1 <= n <= len(self.tools) else ())
        inner = match.group("inner").split("†")[-1]
        return self.identifiers(inner)[0] or self.by_tags(_phrase_tags(inner))

    def identifiers(self, text: str, offset: int = 0) -> tuple[tuple[str, ...], list[DeclaredRefModel]]:
        """Resolvable identifiers in ``text``: URLs, paths, file names, tool names, markers."""
        refs: list[DeclaredRefModel] = []
        for match in MARKER.finditer(text):
            refs.append(
                DeclaredRefModel(
                    text=match.group(),
                    span=_span(match, offset),
                    source_ids=self.by_marker(match),
                    kind="citation_marker",
                )
            )
        for pattern, kind in _IDENTIFIERS:
            for match in pattern.finditer(text):
                token = match.group().rstrip(".,;:")
                ids = self.by_descriptor(token)
                if ids:
                    start = offset + match.start()
                    refs.append(
                        DeclaredRefModel(text=token, span=(start, start + len(token)), source_ids=ids, kind=kind)
                    )
        for name in sorted({p.call for p in self.profiles if len(p.call) >= 4}):
            for match in regex.finditer(r"(?<![\w.])" + regex.escape(name) + r"(?![\w])", text, regex.I):
                ids = tuple(p.unit.id for p in self.profiles if p.call == name)
                refs.append(
                    DeclaredRefModel(text=match.group(), span=_span(match, offset), source_ids=ids, kind="tool_name")
                )
        resolved = tuple(dict.fromkeys(i for r in refs for i in r.source_ids))
        return resolved, refs


def _span(match: regex.Match[str], offset: int) -> tuple[int, int]:
    return offset + match.start(), offset + match.end()


def _cue_refs(sentence: str, resolver: _Resolver) -> Iterator[DeclaredRefModel]:
    for pattern, strong in CUES:
        for match in pattern.finditer(sentence):
            obj = _object(match.group("obj"))
            if not obj or obj.lower() in _PRONOUNS:
                continue  # "drawn from it" names nothing
            start = match.start()
            end = match.start("obj") + len(obj)
            ids, _ = resolver.identifiers(obj, match.start("obj"))
            tags = _phrase_tags(obj)
            named = any(ident.search(obj) for ident, _ in _IDENTIFIERS) or MARKER.search(obj)
            if not ids and not named:  # a path or URL that is not in the context names nothing in it
                ids = resolver.by_tags(tags, weak=not strong)
            if ids or strong:
                families = resolver.families(tags, ids)
                yield DeclaredRefModel(
                    text=sentence[start:end], span=(start, end), source_ids=ids, kind="phrase", families=families
                )
    for pattern, family in HISTORY_CUES:
        for match in pattern.finditer(sentence):
            yield DeclaredRefModel(
                text=match.group(),
                span=_span(match, 0),
                source_ids=resolver.by_tags({"@" + family}),
                kind="history",
                families=(family,),
            )


def declared_refs(sentence: str, corpus: Corpus) -> tuple[DeclaredRefModel, ...]:
    """Every explicit credit in ``sentence``, resolved against ``corpus``, in order of appearance.
    A credit inside another (a path inside "according to …") is reported once, by the outer one."""
    resolver = _Resolver(corpus, sentence)
    found = list(_cue_refs(sentence, resolver)) + resolver.identifiers(sentence)[1]
    found.sort(key=lambda r: (r.span[0], -(r.span[1] - r.span[0])))
    kept: list[DeclaredRefModel] = []
    for ref in found:
        if _NEGATION.search(sentence[: ref.span[1]]):
            continue  # "nothing here is drawn from …", "I did not use …": a disclaimer, not a credit
        if any(k.span[0] <= ref.span[0] and ref.span[1] <= k.span[1] for k in kept):
            continue
        kept.append(ref)
    return tuple(kept)


def audit_declared(
    sentence: str, corpus: Corpus, grounding_ids: Collection[str], *, contradicting_ids: Collection[str] = ()
) -> DeclaredAuditModel:
    """Compare the sources ``sentence`` credits with the sources that verifiably ground it."""
    declared = declared_refs(sentence, corpus)
    credited = tuple(dict.fromkeys(i for r in declared for i in r.source_ids))
    grounding = tuple(g for g in dict.fromkeys(grounding_ids))
    if not declared:
        return DeclaredAuditModel(
            outcome="none_declared",
            declared=(),
            credited=(),
            grounding=grounding,
            explanation="The sentence credits no source.",
        )
    named = (
        _names(corpus, credited)
        if credited
        else "a source that is not in the context (" + ", ".join(repr(r.text) for r in declared) + ")"
    )
    shared = [g for g in grounding if g in credited]
    if shared:
        return DeclaredAuditModel(
            outcome="consistent",
            declared=declared,
            credited=credited,
            grounding=grounding,
            explanation=f"It credits {_names(corpus, shared)}, which grounds the claim.",
        )
    if grounding:
        return DeclaredAuditModel(
            outcome="conflated",
            declared=declared,
            credited=credited,
            grounding=grounding,
            explanation=f"It credits {named}, but the claim is grounded by {_names(corpus, grounding)}.",
        )
    against = [c for c in credited if c in contradicting_ids]
    why = f"{_names(corpus, against)} contradicts it" if against else "the credited source is silent"
    return DeclaredAuditModel(
        outcome="unsupported_citation",
        declared=declared,
        credited=credited,
        grounding=grounding,
        explanation=f"It credits {named}, but nothing grounds the claim: {why}.",
    )


def _names(corpus: Corpus, ids: Collection[str]) -> str:
    known = {u.id: u.label for u in corpus.units}
    return ", ".join(f"{i} ({known[i]})" if i in known else i for i in ids)


@dataclass(frozen=True)
class SourceEvidence:
    """What a trace established about one source: its span-check verdict (verified or not) and role."""

    source_id: str
    verdict: str | None
    verified: bool
    role: str | None
    no_information: bool = False

    @property
    def grounds(self) -> bool:
        if self.verdict == "contradicted" and self.verified:
            return False
        # a redundant source carries the claim alone (any one of the redundant ones is enough)
        return (self.verdict == "supported" and self.verified) or self.role in ("grounds", "redundant")


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def read_trace_sources(trace: Any) -> tuple[SourceEvidence, ...]:
    """The sources of a ``TraceResultModel`` or of its ``to_dict()`` form, as ``SourceEvidence``."""
    out: list[SourceEvidence] = []
    for source in _get(trace, "sources") or ():
        support = _get(source, "support")
        verdict = _get(support, "verdict") if support is not None else None
        verified = bool(support is not None and _get(support, "quote") and not _get(support, "downgraded"))
        no_info = bool(support is not None and _get(support, "no_information"))
        out.append(
            SourceEvidence(
                str(_get(source, "source_id")), verdict, verified and not no_info, _get(source, "role"), no_info
            )
        )
    return tuple(out)


def grounding_ids_from_trace(trace: Any) -> tuple[str, ...]:
    """Sources that verifiably ground the claim: a supported verdict with a verified quote, and/or the
    ablation role ``grounds`` — never a source whose verified quote contradicts it."""
    return tuple(s.source_id for s in read_trace_sources(trace) if s.grounds)


def contradicting_ids_from_trace(trace: Any) -> tuple[str, ...]:
    return tuple(s.source_id for s in read_trace_sources(trace) if s.verdict == "contradicted" and s.verified)


def audit_trace(sentence: str, corpus: Corpus, trace: Any) -> DeclaredAuditModel:
    """``audit_declared`` with the grounding (and contradicting) sources a completed trace established."""
    return audit_declared(
        sentence, corpus, grounding_ids_from_trace(trace), contradicting_ids=contradicting_ids_from_trace(trace)
    )
