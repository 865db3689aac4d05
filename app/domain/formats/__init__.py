"""Wire formats: ingest a batch written in a format, render canonical items into a format.

One module per format (``canonical``, ``openai_chat``, ``openai_responses``, ``anthropic``);
each module docstring states its mapping and its token counting rule.

Invariants:
- ``ingest`` is all-or-nothing: it returns canonical ``NewItem``s for the whole batch or raises
  ``InvalidInput`` listing every problem (``loc`` starts with ``["items", index, ...]``, or
  ``["items", "system", ...]`` for the Anthropic system). Fields the canonical model cannot
  carry are rejected, never silently dropped (documented per format: transport-only fields such
  as ``status`` or ``cache_control`` are ignored).
- In every format, the envelope keys ``id``, ``pinned`` and ``metadata`` may be added to each
  message; when one message yields several canonical items (an assistant message with tool
  calls, an Anthropic message with several blocks) the envelope goes on the first one.
- ``render`` is a pure function of its input: the same items give byte-identical payloads.
  It converts faithfully and does not drop or pair anything; making a payload that a provider
  accepts (pairing, ordering, budgets) is the projection's job (``app.domain.projection``).
- ``payload_usage`` recomputes (tokens, chars) from a rendered payload under the format's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeAlias, get_args

from app.domain.errors import InvalidInput
from app.domain.items import CanonicalItem, NewItem, StoredItem
from app.domain.tokens import DEFAULT_TOKENIZER, TokenizerName

from . import anthropic, canonical, openai_chat, openai_responses
from ._common import Entry, TokenCache, Usage, entries_of

FormatName: TypeAlias = Literal["canonical", "openai-chat", "openai-responses", "anthropic"]
FORMAT_NAMES: tuple[FormatName, ...] = get_args(FormatName)

_Render = Callable[[str | None, Sequence[Entry]], dict[str, Any]]
_RENDER: dict[str, _Render] = {
    "canonical": canonical.render,
    "openai-chat": openai_chat.render,
    "openai-responses": openai_responses.render,
    "anthropic": anthropic.render,
}
_COUNT: dict[str, Callable[[dict[str, Any], Usage], None]] = {
    "canonical": canonical.count,
    "openai-chat": openai_chat.count,
    "openai-responses": openai_responses.count,
    "anthropic": anthropic.count,
}
_REPRESENTABLE: dict[str, Callable[[CanonicalItem], bool]] = {
    "canonical": canonical.representable,
    "openai-chat": openai_chat.representable,
    "openai-responses": openai_responses.representable,
    "anthropic": anthropic.representable,
}


def _check_format(format: str) -> None:
    if format not in _RENDER:
        raise InvalidInput(
            f"unknown format {format!r}",
            errors=[{"loc": ["format"], "msg": f"must be one of {', '.join(FORMAT_NAMES)}"}],
        )


def ingest(format: FormatName, items: list[Any], *, system: Any = None) -> list[NewItem]:
    """Normalise a batch written in ``format`` to canonical ``NewItem``s (all-or-nothing).

    ``system`` is the Anthropic top-level system prompt (a string or a list of text blocks);
    it becomes a canonical system message placed first. Any other format rejects it.
    """
    _check_format(format)
    if not isinstance(items, list):
        raise InvalidInput(
            "items must be a list", errors=[{"loc": ["items"], "msg": "must be a list"}]
        )
    if format == "anthropic":
        return anthropic.ingest(items, system=system)
    if system is not None:
        raise InvalidInput(
            "system is only accepted with the anthropic format",
            errors=[{"loc": ["system"], "msg": "only accepted with format=anthropic"}],
        )
    if format == "canonical":
        return canonical.ingest(items)
    if format == "openai-chat":
        return openai_chat.ingest(items)
    return openai_responses.ingest(items)


def render(
    format: FormatName, *, summary: str | None, items: Sequence[StoredItem]
) -> dict[str, Any]:
    """Payload fields of a context response for ``items`` (ascending seq), summary first.

    canonical → ``{"items": [...]}``, openai-chat → ``{"messages": [...]}``, openai-responses →
    ``{"input": [...]}``, anthropic → ``{"system": ..., "messages": [...]}`` (``system`` absent
    when there is no summary and no system message). Items a format cannot represent (e.g.
    reasoning in openai-chat) are left out.
    """
    _check_format(format)
    return _RENDER[format](summary, entries_of(items))


def render_entries(
    format: FormatName, *, summary: str | None, entries: Sequence[Entry]
) -> dict[str, Any]:
    """``render`` for entries whose bodies the projection may have changed."""
    return _RENDER[format](summary, entries)


def representable(format: FormatName, body: CanonicalItem) -> bool:
    """Whether ``format`` can carry ``body`` at all (reasoning provenance decides)."""
    return _REPRESENTABLE[format](body)


def payload_usage(
    format: FormatName,
    payload: dict[str, Any],
    *,
    tokenizer: TokenizerName = DEFAULT_TOKENIZER,
    cache: TokenCache | None = None,
) -> tuple[int, int]:
    """(tokens, chars) of a rendered payload under ``format``'s documented counting rule."""
    usage = Usage(
        cache=cache if cache is not None and cache.tokenizer == tokenizer else TokenCache(tokenizer)
    )
    _COUNT[format](payload, usage)
    return usage.tokens, usage.chars


__all__ = [
    "FORMAT_NAMES",
    "Entry",
    "FormatName",
    "TokenCache",
    "ingest",
    "payload_usage",
    "render",
    "render_entries",
    "representable",
]
