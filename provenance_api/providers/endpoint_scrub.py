"""Where an operator's model server lives, removed from text a tenant may read.

A provider's error text can repeat the request's URL, its host, its path (``no route for POST
/team-a/v1/completions``) or the credentials in it; ``scrub_endpoint`` replaces each of them with
``[provider]``: the base URL and its origin, ``host:port``, the host as a whole name (with any port), the
user and password of the URL (as written and percent-decoded), its port as a number of its own, and the path
and each path segment other than the usual API words (``v1``, ``chat``, ``completions``, …, which name no
deployment and would otherwise mangle the rest of the text).

A judge configured the litellm way (``OPENAI_API_BASE``, ``AZURE_API_BASE``, ``HOSTED_VLLM_API_BASE``, …)
has no base URL of the service's own: ``environment_endpoints`` lists the URLs such variables hold, so its
errors are scrubbed of them too.
"""

from __future__ import annotations

import os
import re
from urllib.parse import unquote, urlsplit

__all__ = ["PLACEHOLDER", "endpoint_places", "environment_endpoints", "scrub_endpoint"]

PLACEHOLDER = "[provider]"
_ENDPOINT_VARIABLE = re.compile(r"(?i)(_API_BASE|_BASE_URL|_API_URL|_ENDPOINT)$")
_GENERIC_SEGMENTS = frozenset(
    {"v1", "v2", "v3", "api", "apis", "openai", "chat", "completions", "models", "inference", "llm", "engines"}
)


def endpoint_places(url: str | None) -> list[str]:
    """The substrings of ``url`` that say where the server is or how to sign in to it, longest first."""
    if not url:
        return []
    text = url.strip().rstrip("/")
    parts = urlsplit(text)
    places = {text, parts.netloc}
    if parts.scheme and parts.netloc:
        places.add(f"{parts.scheme}://{parts.netloc}")
    host_port = parts.netloc.rsplit("@", 1)[-1]
    places.add(host_port)
    for secret in (parts.username, parts.password):
        if secret:
            places.update({secret, unquote(secret)})
    path = parts.path.rstrip("/")
    if path and path.strip("/").lower() not in _GENERIC_SEGMENTS:
        places.add(path)
        places.update(unquote(s) for s in path.split("/") if s and s.lower() not in _GENERIC_SEGMENTS)
    return sorted((p for p in places if len(p) >= 3), key=len, reverse=True)


def scrub_endpoint(text: str, url: str | None) -> str:
    """``text`` with every place of ``url`` (``endpoint_places``) and its host replaced by ``[provider]``."""
    if not url:
        return text
    for place in endpoint_places(url):
        text = text.replace(place, PLACEHOLDER)
    parts = urlsplit(url.strip())
    if parts.hostname:  # the host alone, or with another port; as a whole name, not inside another word
        name = re.escape(parts.hostname)
        text = re.sub(rf"(?i)(?<![\w.-])\[?{name}\]?(:\d+)?(?![\w-])", PLACEHOLDER, text)
    try:
        port = parts.port
    except ValueError:  # not a number: it was replaced with the rest of the address above
        port = None
    if port is not None:  # a port given apart from its host, as in ('10.0.0.5', 8443)
        text = re.sub(rf"(?<![\w.]){port}(?![\w.])", PLACEHOLDER, text)
    return text


def environment_endpoints() -> list[str]:
    """The URLs in this process's environment variables that name a provider's address (``*_API_BASE``,
    ``*_BASE_URL``, ``*_API_URL``, ``*_ENDPOINT``): where litellm may send a call the service configured no base
    URL for."""
    return sorted(
        value.strip()
        for name, value in os.environ.items()
        if _ENDPOINT_VARIABLE.search(name) and "://" in value and value.strip()
    )
