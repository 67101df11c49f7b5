"""Every prompt is a file here, rendered by one function that fails on a missing variable.

A rendered prompt carries its version: the template's name and a hash of the template
text, recorded in every result so a verdict can be tied to the exact wording that produced it.
"""

from __future__ import annotations

import hashlib
import string
from dataclasses import dataclass
from functools import cache
from importlib import resources


class PromptError(KeyError):
    """A prompt file is missing, or a variable it names was not supplied."""


@dataclass(frozen=True)
class RenderedPrompt:
    name: str
    text: str
    version: str


@cache
def template(name: str) -> tuple[str, str]:
    """The template text of prompt ``name`` and its version string."""
    try:
        text = resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise PromptError(f"no prompt file named {name!r}") from exc
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
    return text, f"{name}@{digest}"


def render(name: str, **variables: str) -> RenderedPrompt:
    """Render ``prompts/<name>.txt`` with ``$variable`` placeholders; a missing one raises PromptError."""
    text, version = template(name)
    try:
        rendered = string.Template(text).substitute(variables)
    except KeyError as exc:
        raise PromptError(f"prompt {name!r} needs variable {exc.args[0]!r}") from exc
    return RenderedPrompt(name=name, text=rendered, version=version)


def versions(*names: str) -> dict[str, str]:
    return {n: template(n)[1] for n in names}
