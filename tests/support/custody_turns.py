"""A payment turn for the custody tests: the agent reads ``get_balance``, then makes a ``send_money`` call, stored
as pydantic-ai stores it — each part with its timestamp and its provenance (server, principal) when given."""

from __future__ import annotations

import json
from typing import Any

from estimator.corpus.turn import StoredTurn

T0 = "2026-03-02T09:00:00+00:00"


def at(seconds: int) -> str:
    return f"2026-03-02T09:{seconds // 60:02d}:{seconds % 60:02d}+00:00"


def payment_turn(
    balance_at: str | None = T0,
    paid_at: str | None = at(45),
    *,
    fetched_for: str = "alice",
    paid_for: str = "alice",
    balance: str = "Balance: 1,200.00 EUR",
) -> StoredTurn:
    """get_balance, then send_money, as pydantic-ai stores them (each part with its timestamp when given)."""

    def when(value: str | None) -> dict[str, Any]:
        return {} if value is None else {"timestamp": value}

    def who(principal: str) -> dict[str, Any]:
        return {"provenance": {"principal": principal, "server": "bank"}}

    messages = [
        {"kind": "request", "parts": [{"part_kind": "user-prompt", "content": "Pay Bob 100 EUR.", **when(T0)}]},
        {
            "kind": "response",
            "parts": [{"part_kind": "tool-call", "tool_name": "get_balance", "args": "{}", "tool_call_id": "c1"}],
            **when(T0),
        },
        {
            "kind": "request",
            "parts": [
                {
                    "part_kind": "tool-return",
                    "tool_name": "get_balance",
                    "content": balance,
                    "tool_call_id": "c1",
                    **when(balance_at),
                    **who(fetched_for),
                }
            ],
        },
        {
            "kind": "response",
            "parts": [
                {
                    "part_kind": "tool-call",
                    "tool_name": "send_money",
                    "args": json.dumps({"to": "Bob", "amount": 100}),
                    "tool_call_id": "c2",
                    **who(paid_for),
                }
            ],
            **when(paid_at),
        },
        {
            "kind": "request",
            "parts": [{"part_kind": "tool-return", "tool_name": "send_money", "content": "sent", "tool_call_id": "c2"}],
        },
        {
            "kind": "response",
            "parts": [{"part_kind": "text", "content": "I have sent 100 EUR to Bob."}],
            **when(None if paid_at is None else at(50)),  # the answer, 5 s after the payment when times are kept
        },
    ]
    return StoredTurn.model_validate(
        {"turn_id": "pay", "response": "I have sent 100 EUR to Bob.", "model_messages": messages}
    )
