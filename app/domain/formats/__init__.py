"""Wire formats: ingest a batch written in a format, render canonical items into a format.

One module per format (``canonical``, ``openai_chat``, ``openai_responses``, ``anthropic``,
``gemini``);
each module docstring states its mapping and its token counting rule.

Invariants:
- ``ingest`` is all-or-nothing: it returns ``NewItem``s for the whole batch or raises
  ``InvalidInput`` listing every problem (``loc`` starts with ``["items", index, ...]``, or
  ``["items", "system", ...]`` for the Anthropic system, ``["system_instruction", ...]`` for
  Gemini's).
- Faithful storage (DESIGN §1): in a provider format every item or message is kept exactly as
  sent, in its ``record``; the canonical ``body`` is a view of it for the projection, derived
  again from the record whenever it is loaded (``decode``). Nothing is dropped or rewritten.
- The envelope keys ``pinned`` and ``metadata`` may be added to each message in every format;
  ``id`` is our item id only in ``canonical`` (in a provider format it is the provider's, and
  stays in the record). When one message yields several canonical items (an assistant message
  with tool calls, an Anthropic message with several blocks) the envelope goes on the first.
- ``render`` is a pure function of its input: the same items give byte-identical payloads.
  An item is rendered from its record in its own format (exactly as sent) and in the target's
  idiom otherwise; what a format cannot carry is left out (``carries``: ``representable``,
  and in ``openai-responses`` reasoning it writes itself only under a reasoning id OpenAI
  issued). It does not pair anything; making a payload that a provider accepts (pairing,
  ordering, budgets) is the projection's job (``app.domain.projection``).
- ``payload_usage`` recomputes (tokens, chars) from a rendered payload under the format's rule.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from typing import Any, Literal, TypeAlias, get_args

from app.domain.errors import InvalidInput
from app.domain.items import (
    CanonicalItem,
    ImagePart,
    NewItem,
    OtherPart,
    StoredItem,
    is_unsendable,
)
from app.domain.tokens import DEFAULT_TOKENIZER, TokenizerName

from . import anthropic, canonical, gemini, openai_chat, openai_responses
from ._common import Entry, TokenCache, Usage, entries_of, image_to_anthropic_source

FormatName: TypeAlias = Literal[
    "canonical", "openai-chat", "openai-responses", "anthropic", "gemini"
]
FORMAT_NAMES: tuple[FormatName, ...] = get_args(FormatName)

_Render = Callable[[str | None, Sequence[Entry]], dict[str, Any]]
_RENDER: dict[str, _Render] = {
    "canonical": canonical.render,
    "openai-chat": openai_chat.render,
    "openai-responses": openai_responses.render,
    "anthropic": anthropic.render,
    "gemini": gemini.render,
}
_COUNT: dict[str, Callable[[dict[str, Any], Usage], None]] = {
    "canonical": canonical.count,
    "openai-chat": openai_chat.count,
    "openai-responses": openai_responses.count,
    "anthropic": anthropic.count,
    "gemini": gemini.count,
}
_REPRESENTABLE: dict[str, Callable[[CanonicalItem, str], bool]] = {
    "canonical": canonical.representable,
    "openai-chat": openai_chat.representable,
    "openai-responses": openai_responses.representable,
    "anthropic": anthropic.representable,
    "gemini": gemini.representable,
}


def _check_format(format: str) -> None:
    if format not in _RENDER:
        raise InvalidInput(
            f"unknown format {format!r}",
            errors=[{"loc": ["format"], "msg": f"must be one of {', '.join(FORMAT_NAMES)}"}],
        )


def ingest(
    format: FormatName, items: list[Any], *, system: Any = None, system_instruction: Any = None
) -> list[NewItem]:
    """Normalise a batch written in ``format`` to canonical ``NewItem``s (all-or-nothing).

    ``system`` is the Anthropic top-level system prompt (a string or a list of text blocks),
    ``system_instruction`` Gemini's (a ``Content`` or a string); either becomes a canonical
    system message placed first. Any other format rejects them.
    """
    _check_format(format)
    if not isinstance(items, list):
        raise InvalidInput(
            "items must be a list", errors=[{"loc": ["items"], "msg": "must be a list"}]
        )
    if system_instruction is not None and format != "gemini":
        raise InvalidInput(
            "system_instruction is only accepted with the gemini format",
            errors=[{"loc": ["system_instruction"], "msg": "only accepted with format=gemini"}],
        )
    if format == "anthropic":
        return anthropic.ingest(items, system=system)
    if format == "gemini" and system is not None:
        raise InvalidInput(
            "gemini takes its system prompt as system_instruction",
            errors=[{"loc": ["system"], "msg": "with format=gemini, send system_instruction"}],
        )
    if format == "gemini":
        return gemini.ingest(items, system_instruction=system_instruction)
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
    when there is no summary and no system message). Items a format cannot carry (e.g.
    reasoning in openai-chat, see ``carries``) are left out.
    """
    _check_format(format)
    return _RENDER[format](summary, entries_of(items))


def render_listing(format: FormatName, items: Sequence[StoredItem]) -> dict[str, Any]:
    """Working-memory items (a page of them) in ``format``, as stored, in the order they were
    added: no summary, in ``anthropic`` no leading user message added before an assistant
    one, and in ``openai-chat`` no answer moved up to its call (a prompt moves it there)."""
    _check_format(format)
    if format == "openai-chat":
        return openai_chat.render(None, entries_of(items), prompt=False)
    if format == "anthropic":
        return anthropic.render(None, entries_of(items), continuation=False)
    if format == "gemini":
        return gemini.render(None, entries_of(items), continuation=False)
    return _RENDER[format](None, entries_of(items))


_DECODE: dict[str, Callable[[dict[str, Any]], CanonicalItem]] = {
    "openai-chat": openai_chat.decode_record,
    "openai-responses": openai_responses.decode_record,
    "anthropic": anthropic.decode_record,
    "gemini": gemini.decode_record,
}


def decode(format: str, record: dict[str, Any]) -> CanonicalItem:
    """The canonical body of a stored provider record (what ``ingest`` made of it)."""
    return _DECODE[format](record)


def placeholder_allowed(item: StoredItem, format: FormatName) -> bool:
    """Whether a call still waiting for its output may get a synthetic one
    (``dangling_tool_calls: placeholder``) in ``format``: a function call; but in
    ``openai-chat`` not Chat's deprecated ``function_call``, rendered there as itself and
    answered by a ``function`` message no placeholder tool message can be. Other formats
    render it as a function call with its derived call id, which a placeholder answers."""
    if item.body.type != "function_call":
        return False
    return format != "openai-chat" or not openai_chat.is_legacy_call(item)


def degraded_parts(
    format: FormatName, rendered: Iterable[tuple[StoredItem, CanonicalItem]]
) -> dict[str, int]:
    """How many parts of each type the ``(item, body)`` pairs (``item`` rendered as ``body``)
    hold that ``format`` has no counterpart for, so it renders them as their text or a
    marker, or leaves them out (an Anthropic server tool's record). An item rendered from its
    own record has none. (One call for a whole payload: a projection asks it of hundreds of
    items, nearly all of them plain text.)"""
    counts: dict[str, int] = {}
    if format == "canonical":
        return counts
    for item, body in rendered:
        if item.format == format and body is item.body:
            continue
        role = "user"
        kind = body.type
        if kind == "message":
            parts, role = body.content, body.role  # type: ignore[union-attr]
        elif kind == "function_call_output":
            parts = body.output  # type: ignore[union-attr]
        else:
            continue
        if parts is None or isinstance(parts, str):
            continue
        for part in parts:
            if type(part) is OtherPart:
                counts[part.type] = counts.get(part.type, 0) + 1
            elif type(part) is ImagePart and format == "gemini":
                in_output = kind == "function_call_output"
                if role in ("system", "developer") or not gemini.image_usable(
                    part, in_output=in_output
                ):
                    counts["image"] = counts.get("image", 0) + 1
            elif type(part) is ImagePart and format != "openai-responses":
                usable = role == "user" or kind == "function_call_output"
                if format == "openai-chat" and (part.url is None or kind != "message"):
                    usable = False
                if format == "anthropic" and image_to_anthropic_source(part) is None:
                    usable = False
                if not usable:
                    counts["image"] = counts.get("image", 0) + 1
    return counts


def lossy_notes(format: FormatName, left: dict[str, int], parts: dict[str, int]) -> list[str]:
    """Report notes naming the items ``format`` cannot carry and the parts it renders as
    text or leaves out (by type, with counts)."""

    def named(counts: dict[str, int]) -> str:
        return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(counts.items()))

    notes: list[str] = []
    if left:
        notes.append(
            f"{format}: left out {sum(left.values())} items it has no counterpart for "
            f"({named(left)})"
        )
    if parts:
        notes.append(
            f"{format}: {sum(parts.values())} parts it has no counterpart for became text, a "
            f"marker or nothing ({named(parts)})"
        )
    return notes


def left_out(format: FormatName, items: Sequence[StoredItem]) -> list[str]:
    """Notes on what a listing of ``items`` in ``format`` could not carry as it was."""
    left: dict[str, int] = {}
    unissued = 0
    kept: list[tuple[StoredItem, CanonicalItem]] = []
    for item in items:
        if is_unsendable(item.body) and item.format == format:
            continue  # listed from its record, exactly as sent (never in a prompt)
        if not representable(format, item.body, origin=item.format):
            left[item.body.type] = left.get(item.body.type, 0) + 1
        elif not carries(format, item):
            unissued += 1
        else:
            kept.append((item, item.body))
    notes = lossy_notes(format, left, degraded_parts(format, kept))
    if unissued:
        notes.append(unissued_reasoning_note(format, unissued))
    return notes


def render_entries(
    format: FormatName, *, summary: str | None, entries: Sequence[Entry]
) -> dict[str, Any]:
    """``render`` for entries whose bodies the projection may have changed."""
    return _RENDER[format](summary, entries)


def representable(format: FormatName, body: CanonicalItem, *, origin: str = "canonical") -> bool:
    """Whether ``format`` has a counterpart for ``body``, ingested in ``origin``, at all
    (reasoning provenance decides, and opaque items exist only in their own format). Whether a
    given stored item is carried can also depend on the item: see ``carries``."""
    return _REPRESENTABLE[format](body, origin)


def carries(format: FormatName, item: StoredItem, *, changed: bool = False) -> bool:
    """Whether a prompt (or listing) in ``format`` carries ``item`` (``changed``: the projection
    changed its body, as Tier 2 trims reasoning): ``representable``, and in
    ``openai-responses`` reasoning it writes itself only under a reasoning id OpenAI issued
    (``openai_responses.carries``); otherwise it is left out."""
    if format == "openai-responses":
        return openai_responses.carries(item, changed=changed)
    return _REPRESENTABLE[format](item.body, item.format)


def carried_by(
    format: FormatName, items: Sequence[StoredItem], *, changed: Container[int] = ()
) -> list[bool]:
    """``carries`` of each item (the projection asks it of every loaded item; ``changed``: the
    indices of those whose body it changed)."""
    if format == "openai-responses":
        return [
            openai_responses.carries(item, changed=i in changed) for i, item in enumerate(items)
        ]
    check = _REPRESENTABLE[format]
    return [check(item.body, item.format) for item in items]


def unissued_reasoning_note(format: FormatName, count: int) -> str:
    """The note on ``count`` reasoning items ``format`` could represent but left out for want
    of a reasoning id its provider issued (``carries`` false, ``representable`` true)."""
    return (
        f"{format}: left out {count} reasoning items without a reasoning id OpenAI issued "
        "(rs_...): the Responses API requires one and refuses any other"
    )


def opens_with_filler(format: FormatName, entries: Sequence[Entry]) -> bool:
    """Whether ``render_entries`` puts a filler message first in the payload of ``entries``:
    in ``gemini``, the ``[earlier conversation omitted]`` user content before a first model
    content, wherever the selection starts (its cost: ``filler_usage``). Anthropic's, put
    first only before a mandatory assistant turn (its cuts start at user messages), is not
    reported here: the cut search splits its candidates there instead."""
    return format == "gemini" and gemini.opens_on_model(entries)


def filler_usage(
    format: FormatName,
    *,
    tokenizer: TokenizerName = DEFAULT_TOKENIZER,
    cache: TokenCache | None = None,
) -> tuple[int, int] | None:
    """(tokens, chars) a filler (``opens_with_filler``) adds to a payload, exactly (a
    format's count adds up over its messages); ``None`` for a format that reports none."""
    if format != "gemini":
        return None
    return payload_usage(format, {"contents": [gemini.filler()]}, tokenizer=tokenizer, cache=cache)


def extension_slack(format: FormatName) -> tuple[int, int] | None:
    """For a format whose count of a payload with whole units rendered into it (after the
    mandatory items, before the rest) is the two counts added, give or take a few messages:
    ``(below, above)``, the most the real count can fall under or exceed that sum. ``None``
    for the others (Anthropic merges neighbouring turns and may drop a leading one; the
    Responses and canonical counts are left to builds)."""
    return openai_chat.EXTENSION_SLACK if format == "openai-chat" else None


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
    "carried_by",
    "carries",
    "decode",
    "degraded_parts",
    "extension_slack",
    "filler_usage",
    "ingest",
    "left_out",
    "lossy_notes",
    "opens_with_filler",
    "payload_usage",
    "placeholder_allowed",
    "render",
    "render_listing",
    "render_entries",
    "representable",
    "unissued_reasoning_note",
]
