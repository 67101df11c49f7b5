"""The hard planted-cause set: at least 120 turns generated from templates over real τ-bench tool returns,
each with its truth known by construction.

The records are real returns of τ-bench's airline tools (``tests/data/tau-bench/``, MIT licence, Sierra):
reservations (``get_reservation_details``), users (``get_user_details``), flights (``search_direct_flight``,
``search_onestop_flight``) and sentences of the airline policy (the agent's system prompt). Single records are
trimmed to the fields a claim needs (a few of them per record), so that a turn fits the study's CPU budget;
the long-context turns keep whole returns. Every draw comes from one seeded ``random.Random``: the set is
the same on every run.

Subsets (and the truth each plants):

* ``paraphrase``   — one tool return carries the claim, restated in other words (codes as city names, times
                     in words): no run of five or more words is shared with the cause (asserted here).
                     Truth: attributed; the cause is that return.
* ``two_cause``    — each half of the claim comes from a different source: two tool returns (a user's tier
                     and a reservation's cabin), or a tool fact plus a sentence the system prompt mandates.
                     Truth: attributed; both sources contribute; either is an acceptable top source.
* ``partial``      — a tool return supports half of the claim; the other half is in no source.
                     Truth: attributed; the cause is that return.
* ``distractor``   — the cause, and a return with the same reservation id, dates and amounts that
                     contradicts the claim (one field flipped). Truth: attributed; the cause, never the
                     look-alike.
* ``redundant``    — the same fact in two tool returns (the record, and a later return of the same record).
                     Truth: attributed (the tools layer); both carry it; either or none is the top source.
* ``knowledge``    — general knowledge on the same topic as the sources (a city's state, an airport's city);
                     no source states it. Truth: internal knowledge; no source.
* ``truncated``    — the cause sits past a truncation boundary of the estimator's defaults: past
                     HISTORY_TOKENS_PER_MESSAGE of a long pasted message, or past SOURCE_TOKEN_CAP of a long
                     tool return (a one-stop flight search). Truth: "cut — cannot tell": no source may be
                     named but the cut one, and the cut must be disclosed.
* ``long_control`` — the same long contexts with the cause inside the window (attributed), or a general-
                     knowledge claim (internal knowledge): what an abstention rule for cut contexts would cost.

The split is by a seeded hash inside each subset (half ``tune``, half ``heldout``): thresholds are chosen on
``tune`` and never on ``heldout``.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from estimator.params import DEFAULT_PARAMS
from estimator.tokens import ApproxTokenizer

ROOT = Path(__file__).resolve().parents[2]
TAU_BENCH = ROOT / "tests" / "data" / "tau-bench" / "airline-gpt-4o-dev.json"
SEED = 20240515
SUBSETS: tuple[str, ...] = (
    "paraphrase",
    "two_cause",
    "partial",
    "distractor",
    "redundant",
    "knowledge",
    "truncated",
    "long_control",
)
PER_SUBSET = 16
LONG_CONTROL = 10
NGRAM = 5
SYSTEM = "You are an airline customer-service agent. Answer the user briefly and accurately."


@dataclass(frozen=True)
class HardTurn:
    """One planted turn. ``causes``: substrings that identify every source carrying (part of) the claim;
    ``cut_fact``: for a truncated turn, the text that carries the claim and lies past the boundary."""

    turn_id: str
    kind: str
    query: str
    claim: str
    expected_verdict: str  # attributed | internal_knowledge | cannot_tell
    tools: tuple[tuple[str, str, str], ...] = ()  # (tool name, JSON arguments, return text)
    system: str = SYSTEM
    history: tuple[tuple[str, str], ...] = ()  # (role, text), oldest first
    causes: tuple[str, ...] = ()
    none_ok: bool = False  # "no top source" is acceptable (redundant carriers)
    cut_fact: str = ""
    mechanism: str = ""
    split: str = field(default="", compare=False)

    def stored_turn(self) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [{"role": role, "content": text} for role, text in self.history]
        messages.append({"role": "user", "content": self.query})
        return {
            "turn_id": self.turn_id,
            "response": self.claim,
            "system_prompt": self.system,
            "system_prompt_versioned": True,
            "response_payload": {
                "tool_calls": [
                    {"name": name, "arguments": json.loads(args), "response": text} for name, args, text in self.tools
                ]
            },
            "request_payload": {"messages": messages},
        }


# ---------------------------------------------------------------- the real τ-bench records


@cache
def _trajectories() -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(TAU_BENCH.read_text(encoding="utf-8"))
    return data


def _returns(tool: str) -> list[str]:
    seen: dict[str, None] = {}
    for t in _trajectories():
        for m in t["traj"]:
            if m["role"] == "tool" and m.get("name") == tool and m["content"].strip().startswith(("{", "[")):
                seen.setdefault(m["content"], None)
    return list(seen)


@cache
def reservations() -> list[dict[str, Any]]:
    """Reservations whose origin and destination differ (a round trip records its turning point)."""
    out: dict[str, dict[str, Any]] = {}
    for text in _returns("get_reservation_details"):
        r = json.loads(text)
        if r["origin"] != r["destination"]:
            out.setdefault(r["reservation_id"], r)
    return [out[k] for k in sorted(out)]


@cache
def users() -> list[dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for text in _returns("get_user_details"):
        u = json.loads(text)
        out.setdefault(u["email"], u)
    return [out[k] for k in sorted(out)]


@cache
def flights() -> list[dict[str, Any]]:
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for text in _returns("search_direct_flight"):
        for f in json.loads(text):
            out.setdefault((f["flight_number"], f["origin"], f["destination"]), f)
    return [out[k] for k in sorted(out)]


@cache
def onestop_returns() -> list[str]:
    return sorted(_returns("search_onestop_flight"), key=len)


@cache
def airports() -> dict[str, str]:
    text = _returns("list_all_airports")[0]
    cities: dict[str, str] = json.loads(text)
    return cities


@cache
def policy() -> str:
    text: str = _trajectories()[0]["traj"][0]["content"]
    return text


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def trim_reservation(r: dict[str, Any], *keys: str) -> dict[str, Any]:
    keys = keys or ("reservation_id", "origin", "destination", "flight_type", "cabin")
    return {k: r[k] for k in keys}


def first_flight(r: dict[str, Any]) -> dict[str, Any]:
    f = r["flights"][0]
    return {"flight_number": f["flight_number"], "date": f["date"], "price": f["price"]}


def trim_flight(f: dict[str, Any]) -> dict[str, Any]:
    return {
        k: f[k]
        for k in (
            "flight_number",
            "origin",
            "destination",
            "scheduled_departure_time_est",
            "scheduled_arrival_time_est",
        )
    }


def trim_user(u: dict[str, Any]) -> dict[str, Any]:
    return {"name": u["name"], "membership": u["membership"], "reservations": u["reservations"][:2]}


CABIN_WORDS = {"business": "business class", "economy": "economy", "basic_economy": "basic economy"}
CABIN_PARAPHRASE = {
    "business": "the premium front cabin",
    "economy": "the main cabin",
    "basic_economy": "the cheapest fare tier",
}
TRIP_PARAPHRASE = {"one_way": "a single-direction journey", "round_trip": "an out-and-back journey"}
HOURS = [
    "midnight",
    "one at night",
    "two at night",
    "three at night",
    "four in the early morning",
    "five in the early morning",
    "six in the morning",
    "seven in the morning",
    "eight in the morning",
    "nine in the morning",
    "ten in the morning",
    "eleven in the morning",
    "noon",
    "one in the afternoon",
    "two in the afternoon",
    "three in the afternoon",
    "four in the afternoon",
    "five in the afternoon",
    "six in the evening",
    "seven in the evening",
    "eight in the evening",
    "nine at night",
    "ten at night",
    "eleven at night",
]


def hour_words(clock: str) -> str:
    hh, mm = int(clock[:2]) % 24, int(clock[3:5])
    base = HOURS[hh]
    return base if mm == 0 else f"half past {base}" if mm == 30 else f"{mm} minutes past {base}"


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def shared_ngrams(a: str, b: str, n: int = NGRAM) -> set[tuple[str, ...]]:
    """Word n-grams (lower-cased alphanumeric runs) that ``a`` and ``b`` share."""
    wa, wb = words(a), words(b)
    grams_a = {tuple(wa[i : i + n]) for i in range(len(wa) - n + 1)}
    return {g for g in (tuple(wb[i : i + n]) for i in range(len(wb) - n + 1)) if g in grams_a}


# ---------------------------------------------------------------- the subsets


def _res_call(r: dict[str, Any], tool: str = "get_reservation_details") -> tuple[str, str]:
    return tool, dumps({"reservation_id": r["reservation_id"]})


def _tool(r: dict[str, Any], body: dict[str, Any], tool: str = "get_reservation_details") -> tuple[str, str, str]:
    name, args = _res_call(r, tool)
    return name, args, dumps(body)


def _shuffled(rng: random.Random, items: Iterable[Any]) -> list[Any]:
    out = list(items)
    rng.shuffle(out)
    return out


def _place(
    rng: random.Random,
    cause: Sequence[tuple[str, str, str]],
    others: Sequence[tuple[str, str, str]],
) -> tuple[tuple[str, str, str], ...]:
    return tuple(_shuffled(rng, [*cause, *others]))


def _city(code: str) -> str:
    return airports().get(code, code)


def paraphrase(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    fl = [f for f in _shuffled(rng, flights()) if f["origin"] in airports() and f["destination"] in airports()]
    rs = [r for r in _shuffled(rng, reservations()) if r["origin"] in airports() and r["destination"] in airports()]
    for i in range(n):
        if i % 2 == 0:
            f = fl[i]
            same_route = [g for g in fl if g is not f and g["origin"] == f["origin"]][:1] or fl[n : n + 1]
            cause = (
                "search_direct_flight",
                dumps({"origin": f["origin"], "destination": f["destination"], "flight_number": f["flight_number"]}),
                dumps(trim_flight(f)),
            )
            others = [
                (
                    "search_direct_flight",
                    dumps(
                        {"origin": g["origin"], "destination": g["destination"], "flight_number": g["flight_number"]}
                    ),
                    dumps(trim_flight(g)),
                )
                for g in same_route
            ]
            claim = (
                f"{f['flight_number']} takes off from {_city(f['origin'])} at "
                f"{hour_words(f['scheduled_departure_time_est'])} and gets into {_city(f['destination'])} at "
                f"{hour_words(f['scheduled_arrival_time_est'][:8])}."
            )
            query = f"When does {f['flight_number']} leave and arrive?"
        else:
            r = rs[i]
            others_r = [q for q in rs if q is not r][i : i + 1]
            cause = _tool(r, trim_reservation(r))
            others = [_tool(q, trim_reservation(q)) for q in others_r]
            claim = (
                f"Booking {r['reservation_id']} is {TRIP_PARAPHRASE[r['flight_type']]} from "
                f"{_city(r['origin'])} to {_city(r['destination'])}, seated in {CABIN_PARAPHRASE[r['cabin']]}."
            )
            query = f"Can you summarise booking {r['reservation_id']} for me?"
        shared = shared_ngrams(claim, cause[2])
        assert not shared, f"paraphrase {i}: the claim shares {shared} with its cause"
        out.append(
            HardTurn(
                f"paraphrase-{i + 1:02d}",
                "paraphrase",
                query,
                claim,
                "attributed",
                tools=_place(rng, [cause], others),
                causes=(cause[2],),
            )
        )
    return out


RULES = [  # sentences of the airline policy, mandated verbatim as the claim's second half
    "The remaining amount of a travel certificate is not refundable.",
    "Each extra baggage is 50 dollars.",
    "Basic economy flights cannot be modified.",
    "The refund will go to original payment methods in 5 to 7 business days.",
    "The user cannot add insurance after initial booking.",
    "Each reservation can have at most five passengers.",
    "Cabin class must be the same across all the flights in the same reservation.",
    "The user can add but not remove checked bags.",
]


def two_cause(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    us = _shuffled(rng, users())
    rs = _shuffled(rng, reservations())
    for rule in RULES:
        assert rule.rstrip(".") in policy(), f"not a policy sentence: {rule}"
    for i in range(n):
        r = rs[i]
        others = [_tool(q, trim_reservation(q)) for q in [rs[(n + i) % len(rs)]] if q is not r]
        if i % 2 == 0:
            u = us[i % len(us)]
            name = f"{u['name']['first_name']} {u['name']['last_name']}"
            a = ("get_user_details", dumps({"user_id": f"{u['name']['first_name'].lower()}_{i}"}), dumps(trim_user(u)))
            b = _tool(r, trim_reservation(r))
            claim = (
                f"{name} is a {u['membership']} member, and reservation {r['reservation_id']} is in "
                f"{CABIN_WORDS[r['cabin']]}."
            )
            query = f"What is my membership tier, and which cabin is {r['reservation_id']}?"
            out.append(
                HardTurn(
                    f"two_cause-{i + 1:02d}",
                    "two_cause",
                    query,
                    claim,
                    "attributed",
                    tools=_place(rng, [a, b], others),
                    causes=(a[2], b[2]),
                    mechanism="two tools",
                )
            )
        else:
            rule = RULES[(i // 2) % len(RULES)]
            system = f"{SYSTEM} Whenever a reservation is discussed, end with this sentence: {rule}"
            b = _tool(r, trim_reservation(r, "reservation_id", "origin", "destination", "cabin"))
            claim = f"Reservation {r['reservation_id']} goes from {r['origin']} to {r['destination']}. {rule}"
            query = f"Where does reservation {r['reservation_id']} go?"
            out.append(
                HardTurn(
                    f"two_cause-{i + 1:02d}",
                    "two_cause",
                    query,
                    claim,
                    "attributed",
                    system=system,
                    tools=_place(rng, [b], others),
                    causes=(b[2], rule),
                    mechanism="tool + rule",
                )
            )
    return out


UNSUPPORTED = [
    "and a hot meal is served on board",
    "and the aircraft has free Wi-Fi",
    "and boarding starts forty minutes early",
    "and the gate is usually at the far end of the terminal",
    "and it is rarely full on weekdays",
    "and the crew speaks Spanish",
    "and the seats have power outlets",
    "and it is the airline's newest plane",
]


def partial(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    fl = _shuffled(rng, flights())
    rs = _shuffled(rng, reservations())
    for i in range(n):
        extra = UNSUPPORTED[i % len(UNSUPPORTED)]
        if i % 2 == 0:
            f = fl[i]
            cause = (
                "search_direct_flight",
                dumps({"origin": f["origin"], "destination": f["destination"]}),
                dumps(trim_flight(f)),
            )
            others = [
                (
                    "search_direct_flight",
                    dumps({"origin": g["origin"], "destination": g["destination"]}),
                    dumps(trim_flight(g)),
                )
                for g in fl[n + i : n + i + 1]
            ]
            claim = (
                f"Flight {f['flight_number']} departs {f['origin']} at "
                f"{f['scheduled_departure_time_est'][:5]}, {extra}."
            )
            query = f"Tell me about flight {f['flight_number']}."
        else:
            r = rs[i]
            ff = first_flight(r)
            cause = _tool(r, {"reservation_id": r["reservation_id"], "flights": [ff]})
            others = [
                _tool(q, {"reservation_id": q["reservation_id"], "flights": [first_flight(q)]})
                for q in rs[n + i : n + i + 1]
            ]
            claim = f"Your first flight is {ff['flight_number']} on {ff['date']}, {extra}."
            query = f"What is the first flight of {r['reservation_id']}?"
        out.append(
            HardTurn(
                f"partial-{i + 1:02d}",
                "partial",
                query,
                claim,
                "attributed",
                tools=_place(rng, [cause], others),
                causes=(cause[2],),
            )
        )
    return out


def distractor(rng: random.Random, n: int) -> list[HardTurn]:
    flips = [
        ("cabin", {"business": "economy", "economy": "business", "basic_economy": "business"}),
        ("insurance", {"yes": "no", "no": "yes"}),
        ("flight_type", {"one_way": "round_trip", "round_trip": "one_way"}),
    ]
    out: list[HardTurn] = []
    rs = _shuffled(rng, reservations())
    for i in range(n):
        r = rs[i]
        key, flip = flips[i % len(flips)]
        body = {"reservation_id": r["reservation_id"], "flights": [first_flight(r)], key: r[key]}
        look_alike = {**body, key: flip[r[key]]}
        cause = _tool(r, body)
        fake = _tool(r, look_alike, "update_reservation_flights" if i % 2 else "get_reservation_details")
        ff = first_flight(r)
        if key == "cabin":
            said = f"is booked in {CABIN_WORDS[r[key]]}"
        elif key == "insurance":
            said = "includes travel insurance" if r[key] == "yes" else "has no travel insurance"
        else:
            said = "is a one-way trip" if r[key] == "one_way" else "is a round trip"
        claim = (
            f"Reservation {r['reservation_id']} with flight {ff['flight_number']} on {ff['date']} "
            f"at {ff['price']} dollars {said}."
        )
        query = f"Remind me of the details of {r['reservation_id']}."
        out.append(
            HardTurn(
                f"distractor-{i + 1:02d}",
                "distractor",
                query,
                claim,
                "attributed",
                tools=_place(rng, [cause], [fake]),
                causes=(cause[2],),
            )
        )
    return out


def redundant(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    rs = _shuffled(rng, reservations())
    for i in range(n):
        r, q = rs[i], rs[n + i]
        body = trim_reservation(r, "reservation_id", "origin", "destination", "cabin")
        a = _tool(r, body)
        later = {**body, "total_baggages": r["total_baggages"] + 1}
        b = _tool(r, later, "update_reservation_baggages")
        other = _tool(q, trim_reservation(q, "reservation_id", "origin", "destination", "cabin"))
        claim = (
            f"Reservation {r['reservation_id']} flies from {r['origin']} to {r['destination']} in "
            f"{CABIN_WORDS[r['cabin']]}."
        )
        query = f"Which route and cabin is {r['reservation_id']}?"
        out.append(
            HardTurn(
                f"redundant-{i + 1:02d}",
                "redundant",
                query,
                claim,
                "attributed",
                tools=_place(rng, [a, b], [other]),
                causes=(a[2], b[2]),
                none_ok=True,
            )
        )
    return out


KNOWLEDGE = [  # (airport code the sources mention, a general-knowledge claim no source states)
    ("ORD", "Chicago is a city in the state of Illinois."),
    ("SEA", "Seattle lies on the Pacific coast of the United States."),
    ("BOS", "Boston is the capital of Massachusetts."),
    ("MIA", "Miami is in the southern part of Florida."),
    ("DEN", "Denver is known as the Mile High City."),
    ("PHX", "Phoenix is the capital of Arizona."),
    ("ATL", "Atlanta is the capital of Georgia."),
    ("IAH", "Houston is the largest city in Texas."),
    ("LAS", "Las Vegas is a desert city in Nevada."),
    ("DTW", "Detroit is a city in Michigan."),
    ("PHL", "Philadelphia is a city in Pennsylvania."),
    ("SFO", "San Francisco is a city in California."),
    ("JFK", "New York City has five boroughs."),
    ("MSP", "Minneapolis sits on the Mississippi River."),
    ("LAX", "Los Angeles is the largest city in California."),
    ("DFW", "Dallas is a city in Texas."),
    ("CLT", "Charlotte is the largest city in North Carolina."),
    ("EWR", "Newark is a city in New Jersey."),
    ("MCO", "Orlando is a city in central Florida."),
    ("LGA", "LaGuardia is one of the airports of New York City."),
]


def knowledge(rng: random.Random, n: int, offset: int = 0) -> list[HardTurn]:
    out: list[HardTurn] = []
    fl = flights()
    for i in range(n):
        code, claim = KNOWLEDGE[(offset + i) % len(KNOWLEDGE)]
        near = [f for f in fl if code in (f["origin"], f["destination"])]
        picks = _shuffled(rng, near)[:2] or _shuffled(rng, fl)[:2]
        tools = tuple(
            (
                "search_direct_flight",
                dumps({"origin": f["origin"], "destination": f["destination"]}),
                dumps(trim_flight(f)),
            )
            for f in picks
        )
        query = f"Is there anything I should know about flying to {code}?"
        out.append(HardTurn(f"knowledge-{i + 1:02d}", "knowledge", query, claim, "internal_knowledge", tools=tools))
    return out


def _long_message(r: dict[str, Any], others: Sequence[dict[str, Any]]) -> tuple[str, str]:
    """A pasted confirmation: whole real records, the one the claim is about last."""
    body = "\n\n".join(dumps(q) for q in [*others, r])
    return "Here are the confirmation emails I received, please keep them in mind:\n\n" + body, dumps(r)


def _onestop_tail(text: str, within: bool, skip: int = 0) -> tuple[dict[str, Any], str]:
    """A leg of a one-stop search return: the ``skip``-th leg from the end whose flight number appears only
    past the scoring window (SOURCE_TOKEN_CAP of the estimator's defaults), or the ``skip``-th leg from the
    start (inside it)."""
    legs = [leg for pair in json.loads(text) for leg in pair]
    if within:
        return legs[skip * 2], legs[skip * 2]["flight_number"]
    kept = ApproxTokenizer().truncate(text, DEFAULT_PARAMS.source_token_cap)
    found = [leg for leg in reversed(legs) if leg["flight_number"] not in kept and dumps(leg) in text]
    if len(found) <= skip:
        raise AssertionError("no leg of this return lies wholly past the scoring window")
    return found[skip], found[skip]["flight_number"]


@cache
def _tails() -> list[tuple[str, dict[str, Any]]]:
    """(long return, a leg of it wholly past the scoring window), one per flight number, in a fixed order."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for text in _long_returns():
        skip = 0
        while True:
            try:
                leg, fn = _onestop_tail(text, within=False, skip=skip)
            except AssertionError:
                break
            out.setdefault(fn, (text, leg))
            skip += 1
    return [out[k] for k in sorted(out)]


def _long_returns() -> list[str]:
    """One-stop search returns longer than the scoring window (SOURCE_TOKEN_CAP), shortest first."""
    tok = ApproxTokenizer()
    out = []
    for text in onestop_returns():
        if tok.count(text) > DEFAULT_PARAMS.source_token_cap + 100:
            try:
                _onestop_tail(text, within=False)
            except AssertionError:
                continue  # every flight number of it recurs inside the window
            out.append(text)
    return out


def truncated(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    rs = _shuffled(rng, reservations())
    for i in range(n):
        mech = ("message cut", "tool window")[i % 2]
        r = rs[i]
        other = rs[n + i]
        distract = _tool(other, trim_reservation(other))
        if mech == "message cut":
            pool = [q for q in rs if q["reservation_id"] not in (r["reservation_id"], other["reservation_id"])]
            fillers = [pool[(3 * i + k) % len(pool)] for k in range(3)]
            text, cut_fact = _long_message(r, fillers)
            claim = f"Reservation {r['reservation_id']} was created on {r['created_at'][:10]}."
            turn = HardTurn(
                f"truncated-{i + 1:02d}",
                "truncated",
                f"When was {r['reservation_id']} created?",
                claim,
                "cannot_tell",
                tools=(distract,),
                history=(("user", text), ("assistant", "Got it.")),
                cut_fact=cut_fact,
                mechanism=mech,
            )
        else:
            text, leg = _tails()[(i // 2) % len(_tails())]
            fn = leg["flight_number"]
            cut_fact = dumps(leg)
            claim = f"Flight {fn} leaves {leg['origin']} at {leg['scheduled_departure_time_est'][:5]}."
            args = dumps({"origin": json.loads(text)[0][0]["origin"], "destination": leg["destination"]})
            turn = HardTurn(
                f"truncated-{i + 1:02d}",
                "truncated",
                f"When does {fn} leave?",
                claim,
                "cannot_tell",
                tools=(("search_onestop_flight", args, text), distract),
                cut_fact=cut_fact,
                mechanism=mech,
            )
        out.append(turn)
    return out


def long_control(rng: random.Random, n: int) -> list[HardTurn]:
    out: list[HardTurn] = []
    rs = _shuffled(rng, reservations())
    longs = _long_returns()
    for i in range(n):
        mech = ("message cut", "tool window", "knowledge")[i % 3]
        r = rs[i]
        pool = [q for q in rs if q["reservation_id"] != r["reservation_id"]]
        pasted = _long_message(pool[(3 * i) % len(pool)], [pool[(3 * i + k) % len(pool)] for k in (1, 2)])[0]
        if mech == "message cut":
            cause = _tool(r, trim_reservation(r))
            claim = f"Reservation {r['reservation_id']} is in {CABIN_WORDS[r['cabin']]}."
            turn = HardTurn(
                f"long_control-{i + 1:02d}",
                "long_control",
                f"Which cabin is {r['reservation_id']}?",
                claim,
                "attributed",
                tools=(cause,),
                history=(("user", pasted), ("assistant", "Got it.")),
                causes=(cause[2],),
                mechanism=mech,
            )
        elif mech == "tool window":
            text = longs[(i // 3) % len(longs)]
            leg, fn = _onestop_tail(text, within=True)
            claim = f"Flight {fn} leaves {leg['origin']} at {leg['scheduled_departure_time_est'][:5]}."
            args = dumps({"origin": leg["origin"], "destination": json.loads(text)[0][-1]["destination"]})
            turn = HardTurn(
                f"long_control-{i + 1:02d}",
                "long_control",
                f"When does {fn} leave?",
                claim,
                "attributed",
                tools=(("search_onestop_flight", args, text),),
                causes=(dumps(leg),),
                mechanism=mech,
            )
        else:
            code, fact = KNOWLEDGE[-1 - i % len(KNOWLEDGE)]
            turn = HardTurn(
                f"long_control-{i + 1:02d}",
                "long_control",
                f"Anything to know about {code}?",
                fact,
                "internal_knowledge",
                tools=(_tool(r, trim_reservation(r)),),
                history=(("user", pasted), ("assistant", "Got it.")),
                mechanism=mech,
            )
        out.append(turn)
    return out


# ---------------------------------------------------------------- the set and its split


def split_of(turn_id: str, members: Sequence[str], seed: int = SEED) -> str:
    """Half of each subset (by a seeded hash of the turn id) tunes; the other half is held out."""
    order = sorted(members, key=lambda t: hashlib.sha256(f"{seed}:{t}".encode()).hexdigest())
    return "tune" if order.index(turn_id) < (len(order) + 1) // 2 else "heldout"


def generate(seed: int = SEED, per_subset: int = PER_SUBSET, long_controls: int = LONG_CONTROL) -> list[HardTurn]:
    """The whole set, subsets in ``SUBSETS`` order, each turn with its split."""
    rng = random.Random(seed)
    builders = {
        "paraphrase": paraphrase,
        "two_cause": two_cause,
        "partial": partial,
        "distractor": distractor,
        "redundant": redundant,
        "knowledge": knowledge,
        "truncated": truncated,
    }
    turns: list[HardTurn] = []
    for kind in SUBSETS:
        made = long_control(rng, long_controls) if kind == "long_control" else builders[kind](rng, per_subset)
        ids = [t.turn_id for t in made]
        turns.extend(HardTurn(**{**t.__dict__, "split": split_of(t.turn_id, ids, seed)}) for t in made)
    return turns


HARD: tuple[HardTurn, ...] = tuple(generate())
