"""Redaction patterns: which values (API keys, card numbers, tokens) are replaced before a turn is stored.

Off unless the operator configures ``PROVENANCE_REDACT_PATTERNS``: a comma-separated list of built-in names
(``api_key,card_number,bearer_token``) or a JSON object of names to regular expressions, where an empty value
(or ``"builtin"``) takes the built-in of that name (``{"api_key": "", "ticket": "TCK-[0-9]{6}"}``). A name is
1–32 of ``a-z0-9_``. A pattern with a group named ``value`` replaces only that group (``Bearer <token>`` keeps
``Bearer``). A bad pattern or an unknown built-in name stops the service at startup, naming the setting.

Each match becomes ``[redacted:NAME]`` on the same line: a match that spans lines is followed by as many line
breaks as it held, so every later line keeps its number and line spans stay valid. Applying the rules to a
stored turn is ``operations/redaction.py``; the stored turn says where values were replaced (``REDACTED_KEY``
of its metadata), never what they were.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["BUILTINS", "REDACTED_KEY", "Redactor", "marker", "parse_patterns"]

REDACTED_KEY = "provenance_redacted"
"""The stored turn's metadata key that records what redaction replaced: ``{"values", "patterns", "sources"}``."""

SETTING = "PROVENANCE_REDACT_PATTERNS"
_NAME = re.compile(r"[a-z0-9_]{1,32}")


def luhn_ok(digits: str) -> bool:
    """The Luhn check of a card number (spaces and dashes ignored)."""
    numbers = [int(c) for c in digits if c.isdigit()]
    if not 13 <= len(numbers) <= 19:
        return False
    total = 0
    for i, n in enumerate(reversed(numbers)):
        if i % 2 == 1:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


BUILTINS: dict[str, str] = {
    # provider keys: sk-…, sk-proj-…, sk-ant-…, rk-/pk- keys, GitHub tokens, AWS access key ids
    "api_key": r"\b(?:sk|rk|pk)-[A-Za-z0-9][A-Za-z0-9_\-]{15,}|\bgh[pousr]_[A-Za-z0-9]{30,}|\bAKIA[0-9A-Z]{16}\b",
    # 13–19 digits, optionally grouped by spaces or dashes; a match must pass the Luhn check
    "card_number": r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])",
    "bearer_token": r"(?i)\bbearer\s+(?P<value>[A-Za-z0-9\-._~+/]{8,}=*)",
}
_CHECKS: dict[str, Callable[[str], bool]] = {"card_number": luhn_ok}


def marker(name: str) -> str:
    return f"[redacted:{name}]"


def parse_patterns(value: object) -> dict[str, str]:
    """The setting's value as {name: regex}; ValueError naming the setting for anything it cannot use."""
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        raw = value.strip()
        if raw.startswith("{"):
            try:
                value = json.loads(raw)
            except ValueError as exc:
                raise ValueError(f"{SETTING} is not a JSON object: {exc}") from None
        else:
            value = {name.strip(): "" for name in raw.split(",") if name.strip()}
    if not isinstance(value, dict):
        raise ValueError(f"{SETTING} must be a list of built-in names or a JSON object of names to patterns")
    patterns: dict[str, str] = {}
    for name, pattern in value.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ValueError(f"{SETTING}: {name!r} is not a pattern name (1–32 of a-z, 0-9, _)")
        if pattern in (None, "", "builtin"):
            if name not in BUILTINS:
                raise ValueError(f"{SETTING}: no built-in pattern {name!r} (built-ins: {', '.join(BUILTINS)})")
            pattern = BUILTINS[name]
        if not isinstance(pattern, str):
            raise ValueError(f"{SETTING}: the pattern of {name!r} must be a string")
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{SETTING}: the pattern of {name!r} is not a valid regular expression: {exc}") from None
        if compiled.match(""):
            raise ValueError(f"{SETTING}: the pattern of {name!r} matches the empty text")
        patterns[name] = pattern
    return patterns


@dataclass(frozen=True)
class Redactor:
    """The configured rules, compiled: ``redact`` replaces every match in a text."""

    rules: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def from_patterns(cls, patterns: dict[str, str]) -> Redactor:
        return cls(tuple((name, re.compile(pattern)) for name, pattern in patterns.items()))

    def __bool__(self) -> bool:
        return bool(self.rules)

    @property
    def markers(self) -> tuple[str, ...]:
        return tuple(marker(name) for name, _ in self.rules)

    def redact(self, text: str) -> tuple[str, Counter[str]]:
        """``text`` with every match replaced by its marker (line breaks kept), and how many per rule."""
        counts: Counter[str] = Counter()
        for name, pattern in self.rules:
            check = _CHECKS.get(name)

            def replace(match: re.Match[str], name: str = name, check: Callable[[str], bool] | None = check) -> str:
                whole = match.group(0)
                group = "value" if "value" in match.re.groupindex and match.group("value") is not None else 0
                found = match.group(group)
                if check is not None and not check(found):
                    return whole
                counts[name] += 1
                start, end = match.start(group) - match.start(), match.end(group) - match.start()
                return whole[:start] + marker(name) + "\n" * found.count("\n") + whole[end:]

            text = pattern.sub(replace, text)
        return text, counts
