"""The planted-cause suite: small turns written by us, each with its truth known by construction.

Kinds (and the truth each plants):

* ``tool``       — one tool return states the claim; other tool returns on the same topic are distractors.
                   Truth: attributed, top layer ``tools``, top source the carrying return.
* ``rule``       — a system-prompt rule mandates the sentence (a disclaimer, a sign-off, a fixed phrase).
                   Truth: attributed, top layer ``instructions``, top source the instructions unit.
* ``history``    — an earlier message of the conversation states the claim.
                   Truth: attributed, top layer ``history``, top source that message.
* ``redundant``  — two sources in different layers (a tool return and an earlier message) both state it.
                   Truth: redundant (no single layer's removal matters), either carrier acceptable.
* ``knowledge``  — no source states the claim; it is common knowledge; sources are on the same topic.
                   Truth: internal knowledge, no top source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Planted:
    turn_id: str
    kind: str
    query: str
    claim: str
    tools: tuple[tuple[str, str], ...] = ()  # (tool name, return text)
    system: str | None = "You are a helpful assistant for a support team. Answer briefly."
    history: tuple[str, ...] = ()  # alternating user / assistant, oldest first
    cause: tuple[str, ...] = field(default=())  # substrings identifying the carrying source(s)

    @property
    def expected_verdict(self) -> str:
        return {"redundant": "redundant", "knowledge": "internal_knowledge"}.get(self.kind, "attributed")

    @property
    def expected_layer(self) -> str | None:
        return {"tool": "tools", "rule": "instructions", "history": "history"}.get(self.kind)

    def stored_turn(self) -> dict[str, Any]:
        messages: list[dict[str, Any]] = [
            {"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(self.history)
        ]
        messages.append({"role": "user", "content": self.query})
        return {
            "turn_id": self.turn_id,
            "response": self.claim,
            "system_prompt": self.system,
            "system_prompt_versioned": True,
            "response_payload": {
                "tool_calls": [
                    {"name": name, "arguments": {"q": self.query[:40]}, "response": text} for name, text in self.tools
                ]
            },
            "request_payload": {"messages": messages},
        }


def _tool(i: int, query: str, claim: str, cause: str, distractors: tuple[str, ...], name: str = "lookup") -> Planted:
    tools = [(name, d) for d in distractors]
    tools.insert(i % (len(tools) + 1), (name, cause))
    return Planted(f"tool-{i:02d}", "tool", query, claim, tools=tuple(tools), cause=(cause,))


TOOL = [
    _tool(
        1,
        "When does order 4471 arrive?",
        "Order 4471 will arrive on Thursday, 14 March.",
        '{"order": 4471, "status": "shipped", "eta": "Thursday, 14 March"}',
        (
            '{"order": 4470, "status": "delivered", "eta": "Monday, 4 March"}',
            '{"carrier": "DHL", "depot": "Leipzig", "hours": "8-18"}',
        ),
    ),
    _tool(
        2,
        "What is the rate limit of the search API?",
        "The search API allows 120 requests per minute.",
        "search API: limit 120 requests per minute per key; burst 20.",
        ("billing API: limit 30 requests per minute per key.", "Status page: all systems operational."),
    ),
    _tool(
        3,
        "Which port does the metrics exporter listen on?",
        "The metrics exporter listens on port 9464.",
        "exporter.yaml:\n  metrics:\n    port: 9464\n    path: /metrics",
        ("server.yaml:\n  http:\n    port: 8080", "logging.yaml:\n  level: info"),
    ),
    _tool(
        4,
        "Who is the on-call engineer this week?",
        "This week's on-call engineer is Priya Raman.",
        "On-call rota, week 11: primary Priya Raman, secondary Tom Ek.",
        ("On-call rota, week 10: primary Jonas Weber.", "Escalation policy: page after 15 minutes."),
    ),
    _tool(
        5,
        "What is the refund window for shoes?",
        "Shoes can be refunded within 45 days of delivery.",
        "Returns policy, footwear: refundable within 45 days of delivery if unworn.",
        ("Returns policy, electronics: refundable within 14 days.", "Gift cards are not refundable."),
    ),
    _tool(
        6,
        "What is the boiling point of the coolant?",
        "The coolant boils at 129 °C at 1 bar.",
        "Coolant X-40 datasheet: boiling point 129 °C at 1 bar; freezing point −37 °C.",
        ("Coolant X-20 datasheet: boiling point 106 °C at 1 bar.", "Pump P3 datasheet: max 4 bar."),
    ),
    _tool(
        7,
        "How many seats are left on flight LH 904?",
        "Flight LH 904 has 7 seats left.",
        '{"flight": "LH 904", "seats_left": 7, "gate": "B42"}',
        ('{"flight": "LH 906", "seats_left": 31, "gate": "B40"}', '{"airport": "FRA", "delays": "none"}'),
    ),
    _tool(
        8,
        "Which Python version does the build image use?",
        "The build image uses Python 3.11.9.",
        "Dockerfile.build: FROM python:3.11.9-slim\nRUN pip install uv",
        ("Dockerfile.docs: FROM node:20-alpine", "ci.yml: runs-on ubuntu-22.04"),
    ),
    _tool(
        9,
        "What was the Q3 revenue of the EMEA region?",
        "EMEA revenue in Q3 was 18.4 million euros.",
        "Q3 report, EMEA: revenue 18.4 million euros, up 6 percent.",
        ("Q3 report, APAC: revenue 11.2 million euros.", "Q2 report, EMEA: revenue 17.3 million euros."),
    ),
    _tool(
        10,
        "What is the Wi-Fi password for the Berlin office?",
        "The Berlin office Wi-Fi password is kestrel-82.",
        "Office networks: Berlin guest SSID bx-guest, password kestrel-82.",
        ("Office networks: Munich guest SSID mx-guest, password falcon-17.", "IT hours: 9-17 on weekdays."),
    ),
    _tool(
        11,
        "When does the library close on Saturday?",
        "On Saturday the library closes at 16:30.",
        "Opening hours: Saturday 10:00-16:30, Sunday closed.",
        ("Cafe hours: Saturday 08:00-14:00.", "Holiday notice: closed on 1 May."),
    ),
    _tool(
        12,
        "Which dataset version did the model train on?",
        "The model was trained on dataset version v7.2.",
        "training-run 5581: dataset=v7.2, epochs=3, lr=3e-4",
        ("training-run 5580: dataset=v7.1, epochs=2", "eval-run 912: benchmark=holdout-b"),
    ),
]

RULE_SYSTEM = "You are a support assistant for an investment app. Answer briefly. {rule}"
RULE = [
    Planted(
        f"rule-{i:02d}",
        "rule",
        query,
        claim,
        system=RULE_SYSTEM.format(rule=rule),
        cause=(rule,),
        tools=(("lookup", context),),
    )
    for i, (query, claim, rule, context) in enumerate(
        [
            (
                "Should I buy more index funds?",
                "This is not financial advice.",
                "Always end every answer with the sentence: This is not financial advice.",
                "Index funds: average annual fee 0.2 percent.",
            ),
            (
                "Is my card blocked?",
                "For security, never share your PIN with anyone.",
                "Whenever cards are discussed, include: For security, never share your PIN with anyone.",
                '{"card": "****1142", "status": "blocked", "reason": "3 wrong PIN entries"}',
            ),
            (
                "Can you close my account today?",
                "Account closures are handled by the Care team at care@example.org.",
                "For account closures always say: Account closures are handled by the Care team at care@example.org.",
                '{"account": "A-2231", "balance": "0.00"}',
            ),
            (
                "What is the interest on savings?",
                "Rates can change at any time.",
                "After quoting any rate, add: Rates can change at any time.",
                "Savings product Flex: 2.1 percent per year.",
            ),
            (
                "Tell me about crypto trading.",
                "Crypto assets are highly volatile and you may lose all your money.",
                "Mention crypto only with the warning: "
                "Crypto assets are highly volatile and you may lose all your money.",
                "Supported coins: BTC, ETH.",
            ),
            (
                "How do I reset my password?",
                "Thank you for banking with Northwind.",
                "Sign off every answer with: Thank you for banking with Northwind.",
                "Password reset: Settings > Security > Reset password.",
            ),
        ],
        start=1,
    )
]

HISTORY = [
    Planted(
        f"history-{i:02d}", "history", query, claim, history=(said, reply), cause=(said,), tools=(("lookup", context),)
    )
    for i, (query, claim, said, reply, context) in enumerate(
        [
            (
                "Which order number did I give you?",
                "Your order number is 7731-XQ.",
                "Hi, my order number is 7731-XQ and the parcel is late.",
                "Sorry to hear that, let me check.",
                '{"orders_found": 0}',
            ),
            (
                "What is my preferred delivery day?",
                "Your preferred delivery day is Wednesday.",
                "Please always deliver on Wednesday, that is my preferred delivery day.",
                "Noted, Wednesday it is.",
                "Delivery slots: Monday to Saturday.",
            ),
            (
                "What did I say my budget was?",
                "Your budget is 2,400 euros.",
                "I am looking for a laptop and my budget is 2,400 euros.",
                "Great, I can help you compare models.",
                "Laptop catalogue: 37 models in stock.",
            ),
            (
                "Which city am I moving to?",
                "You are moving to Rotterdam.",
                "We are moving to Rotterdam in June and need to change the address.",
                "Happy to help with the move.",
                "Address change form: requires new postcode.",
            ),
            (
                "What's the name of my dog again?",
                "Your dog's name is Biscuit.",
                "My dog Biscuit needs a vet appointment next week.",
                "Of course, which day suits you?",
                "Vet clinic opening hours: 8-18.",
            ),
        ],
        start=1,
    )
]

REDUNDANT = [
    Planted(
        f"redundant-{i:02d}",
        "redundant",
        query,
        claim,
        history=(said, "Thanks, noted."),
        tools=(("lookup", ret), ("lookup", distractor)),
        cause=(ret, said),
    )
    for i, (query, claim, said, ret, distractor) in enumerate(
        [
            (
                "When is the meeting?",
                "The meeting is on Friday at 10:00.",
                "Reminder: the meeting is on Friday at 10:00.",
                "Calendar: team meeting, Friday 10:00, room 4.",
                "Calendar: lunch, Thursday 12:30.",
            ),
            (
                "What is the ticket number?",
                "The ticket number is INC-55102.",
                "I opened ticket INC-55102 yesterday.",
                '{"ticket": "INC-55102", "state": "open"}',
                '{"ticket": "INC-55098", "state": "closed"}',
            ),
            (
                "Which plan am I on?",
                "You are on the Pro plan.",
                "I upgraded to the Pro plan last month.",
                '{"customer": 881, "plan": "Pro"}',
                '{"plans": ["Free", "Pro", "Team"]}',
            ),
            (
                "What is the invoice total?",
                "The invoice total is 312.50 euros.",
                "The invoice I got says 312.50 euros in total.",
                "Invoice 2024-118: total 312.50 euros.",
                "Invoice 2024-117: total 98.00 euros.",
            ),
        ],
        start=1,
    )
]

KNOWLEDGE = [
    Planted(f"knowledge-{i:02d}", "knowledge", query, claim, tools=(("lookup", a), ("lookup", b)))
    for i, (query, claim, a, b) in enumerate(
        [
            (
                "Where is our Paris office?",
                "Paris is the capital of France.",
                "Paris office: 12 Rue de Rivoli, 3rd floor.",
                "Office phone: +33 1 55 00 00 00.",
            ),
            (
                "Does the pool heater handle boiling?",
                "Water boils at 100 degrees Celsius at sea level.",
                "Pool heater H2: max water temperature 40 °C.",
                "Pool volume: 50 cubic metres.",
            ),
            (
                "How far is the Moon for the demo?",
                "The Moon orbits the Earth.",
                "Demo script: show the lunar lander animation at minute 3.",
                "Projector: 4K, HDMI.",
            ),
            (
                "How many days is the sprint in a week?",
                "A week has seven days.",
                "Sprint length: 2 weeks, starting Mondays.",
                "Sprint goal: ship the billing page.",
            ),
            (
                "Is the build written in Python?",
                "Python is a programming language.",
                "Build: make all; tests: pytest -q.",
                "Repository: 412 files.",
            ),
        ],
        start=1,
    )
]

SUITE: tuple[Planted, ...] = (*TOOL, *RULE, *HISTORY, *REDUNDANT, *KNOWLEDGE)
