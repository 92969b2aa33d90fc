"""Which wire form ``serve`` answers at which path: each :class:`~tcbreplay._replay.wire.Wire`
by its name, and the paths it is served at (with and without the ``/v1`` a base URL may
hold; Gemini's by the pattern of its model's methods)."""

from __future__ import annotations

import re

from tcbreplay._replay import wire_gemini, wire_responses
from tcbreplay._replay.wire import OpenAIWire, Wire
from tcbreplay._replay.wire_anthropic import AnthropicWire

WIRES: dict[str, Wire] = {
    "openai": OpenAIWire(),
    "anthropic": AnthropicWire(),
    "gemini": wire_gemini.GeminiWire(),
    "responses": wire_responses.ResponsesWire(),
}
ROUTES = {
    "/v1/chat/completions": "openai",
    "/chat/completions": "openai",
    "/v1/messages": "anthropic",
    "/messages": "anthropic",
    "/v1/responses": "responses",
    "/responses": "responses",
}
# every path served (GET / lists them): each wire's, with /v1 and without; Gemini's methods
# under the versions its clients send (google-genai's v1beta, and v1 when asked); what GET
# answers (this list, and an answer kept by its id)
ENDPOINTS = [*ROUTES,
             *(f"/{version}/models/{{model}}:{method}" for version in ("v1beta", "v1")
               for method in ("generateContent", "streamGenerateContent?alt=sse")),
             "GET /", "GET /v1", "GET /v1/responses/{id}", "GET /responses/{id}",
             "DELETE /v1/responses/{id}", "DELETE /responses/{id}",
             "POST /v1/responses/{id}/cancel", "POST /responses/{id}/cancel"]  # fmt: skip


def _by_method(endpoints: list[str]) -> str:
    """The paths of ``endpoints`` by their method (those without one are POST's), each
    method once in the order first listed: ``POST /a, /b; GET /``."""
    paths: dict[str, list[str]] = {}
    for listed in endpoints:
        method, _, path = listed.rpartition(" ")
        paths.setdefault(method or "POST", []).append(path)
    return "; ".join(f"{method} {', '.join(found)}" for method, found in paths.items())


# what a request to a path not served is told: every path served, as GET / lists them
SERVED = _by_method(ENDPOINTS)
# an answer given asked for again by its id (GET; DELETE forgets it): the Responses API's
_KEPT = re.compile(r"^(?:/v1)?/responses/(?P<id>[^/]+)$")
# an answer given asked to be cancelled (POST): the Responses API's
_CANCEL = re.compile(r"^(?:/v1)?/responses/(?P<id>[^/]+)/cancel$")
# a Gemini API version of its own (no other API serves under it)
_GEMINI_VERSION = re.compile(r"^/v1(?:alpha|beta)[0-9]*(?:/.*)?$")


def route(path: str) -> str | None:
    """The name of the wire served at ``path`` (its query string left out), or None."""
    path = path.rstrip("/")
    found = ROUTES.get(path)
    if found is None and wire_gemini.matches(path):
        return "gemini"
    return found


def shape(path: str) -> str:
    """The name of the wire whose error shape an answer at ``path`` takes: the one served
    there, Gemini's at any method of a Gemini model (``:countTokens``) and under Gemini's
    versions (``GET /v1beta/models``), else OpenAI's."""
    found = route(path)
    path = path.rstrip("/")
    if found is None and (wire_gemini.PATH.match(path) or _GEMINI_VERSION.match(path)):
        return "gemini"
    return found or "openai"


def kept(path: str) -> tuple[str, str] | None:
    """The wire and the id of an answer asked for again at ``path`` (its query string left
    out: ``/v1/responses/{id}``), or None."""
    found = _KEPT.match(path.rstrip("/"))
    return ("responses", found["id"]) if found is not None else None


def doubled_version(path: str) -> str | None:
    """The wire a path not served would reach without its first ``/v1`` (``/v1/v1/messages``:
    a client that adds ``/v1`` itself given a base URL ending in ``/v1``), or None."""
    path = path.rstrip("/")
    if not path.startswith("/v1/v1"):
        return None
    return route(path[len("/v1") :])


def base_url_hint(wire: str) -> str:
    """What a client of ``wire`` whose base URL holds one ``/v1`` too many is told."""
    if wire in ("anthropic", "gemini"):
        name = "Anthropic" if wire == "anthropic" else "Gemini"
        return (f"; {name}'s client adds /v1 itself: give it the server's address without "
                "/v1 as its base URL (http://HOST:PORT)")  # fmt: skip
    return "; the base URL holds /v1 twice: give OpenAI's client http://HOST:PORT/v1"


def cancel_of(path: str) -> tuple[str, str] | None:
    """The wire and the id of an answer asked to be cancelled at ``path``
    (``/v1/responses/{id}/cancel``), or None."""
    found = _CANCEL.match(path.rstrip("/"))
    return ("responses", found["id"]) if found is not None else None
