"""Reading a stored turn from a JSON file, with errors that name the problem and the fix."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from estimator.corpus.turn import StoredTurn
from provenance_api.core.errors import InvalidInput


def load_turn_file(path: str | Path) -> StoredTurn:
    p = Path(path)
    try:
        raw = p.read_text(encoding="utf-8-sig")  # a UTF-8 BOM is accepted
    except FileNotFoundError as exc:
        raise InvalidInput(f"no such file: {p}", field="FILE", fix="pass the path of a stored-turn JSON file") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{p} is not UTF-8 text", field="FILE", fix="save the file as UTF-8 JSON") from exc
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{p} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            field="FILE",
            fix="fix the JSON syntax",
        ) from exc
    try:
        return StoredTurn.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "(root)"
        raise InvalidInput(
            f"{p}: field {where}: {first['msg']}",
            field=where,
            fix="the file must be a stored turn (see fixtures/ for examples)",
        ) from exc
