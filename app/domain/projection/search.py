"""The cut search: the earliest candidate cut whose payload fits every limit.

Cost grows as the cut moves earlier, so "fits" is monotone over the candidates (ascending
start), and the earliest fitting one is found by a search that builds as few payloads as it
can: a cheap per-item estimate (``item_costs``) says where to start probing, and the exact
search gallops outward from that guess before bisecting (``first_true_near``). When the guess
fits, the probe of the candidate before it is usually answered without a build: in a format
whose count adds up (openai-chat), that candidate's payload is the built one with the units in
between rendered into it (``Builder.extended``).

A filler message a format puts first breaks that monotony (gemini: ``[earlier conversation
omitted]`` before a first model content, wherever the tail starts; ``formats.opens_with_filler``):
moving the cut back over a user turn cheaper than the filler makes the payload smaller, so a
longer tail can fit where a shorter one does not. Such a payload is its *bare* payload, which
does grow with the selection, plus the filler when it opens on the model's side;
``filler_cut`` searches the bare costs (``Render.bare_violated``) and places the filler
exactly. (Anthropic's filler only ever precedes a mandatory assistant turn, its cuts starting
at user messages: ``tight_cut`` splits the candidates there.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate
from typing import cast

from app.domain.formats import FormatName, TokenCache
from app.domain.items import (
    CanonicalItem,
    MessageItem,
    StoredItem,
    item_images,
    item_texts,
)
from app.domain.tokens import DEFAULT_TOKENIZER, image_tokens

from .analysis import CALL, OUTPUT, ROLE_OF_KIND, SYSTEM
from .budget import LimitName

EST_PER_ITEM = 3  # the framing every format charges per message, item or tool block
Columns = tuple[list[int], list[int], list[int]]  # items, tokens, chars; one int per item


def item_costs(
    items: Sequence[StoredItem],
    shown: Sequence[CanonicalItem],
    kinds: Sequence[int],
    transformed: Mapping[int, CanonicalItem],
    can_render: Sequence[bool],
    *,
    format: FormatName,
    cache: TokenCache,
) -> Columns:
    """(items, tokens, chars) per item under the format's counting rule, assuming each item's
    framing depends only on the item before it (0 for what is not rendered). Only a guide:
    the exact search and the stable grid start from it. Stored counts serve for the default
    tokenizer; others go through the projection's cache, so the builds that follow count
    nothing twice.

    ``shown`` is each item's body as rendered; ``transformed`` holds the items whose body
    differs from the stored one. Returned as three columns of plain ints (no tuple per item).
    """
    n = len(kinds)
    item_col = [1 if ok else 0 for ok in can_render]
    token_col = [0] * n
    char_col = [0] * n
    previous = ""
    stored_tokens = cache.tokenizer == DEFAULT_TOKENIZER
    chat = format == "openai-chat"
    anthropic = format in ("anthropic", "gemini")  # turns of one side merge
    for i, kind in enumerate(kinds):
        if not can_render[i]:
            continue
        body = shown[i]
        if i not in transformed and stored_tokens:
            tokens = items[i].tokens  # counted at write time, with the same rule
            chars = items[i].chars  # measured at write time: item_chars(body)
        else:
            texts = item_texts(body)
            tokens = sum(cache.count(t) for t in texts) + sum(
                image_tokens(p.detail) for p in item_images(body)
            )
            chars = sum(len(t) for t in texts)
        # the role the renderer gives: a message's own, "user" for outputs, else "assistant"
        role = cast(MessageItem, body).role if kind == SYSTEM else ROLE_OF_KIND[kind]
        framing = EST_PER_ITEM
        if chat and kind == CALL:
            framing += 0 if previous == "assistant" else EST_PER_ITEM
        elif chat and kind == OUTPUT:
            role = "tool"
        elif anthropic:
            block = kind == CALL or kind == OUTPUT
            framing = (EST_PER_ITEM if block else 0) + (0 if role == previous else EST_PER_ITEM)
        previous = role
        token_col[i] = tokens + framing
        char_col[i] = chars
    return item_col, token_col, char_col


def summary_costs(summary: str | None, cache: TokenCache) -> tuple[int, int, int]:
    """(items, tokens, chars) the summary adds, estimated like an item."""
    if not summary:
        return 0, 0, 0
    return 0, cache.count(summary) + EST_PER_ITEM, len(summary)


def estimated_cut(
    cut_starts: Sequence[int],
    limits: Mapping[LimitName, int],
    *,
    columns: Columns,
    closure: set[int],
    summary: tuple[int, int, int],
) -> int:
    """Index of the earliest candidate cut (given by the item each starts at) whose estimated
    cost fits every limit; the closure is always sent, so it counts once, in the base."""
    item_col, token_col, char_col = (list(c) for c in columns)
    base_items, base_tokens, base_chars = summary
    for i in closure:
        base_items += item_col[i]
        base_tokens += token_col[i]
        base_chars += char_col[i]
        item_col[i] = token_col[i] = char_col[i] = 0
    n = len(item_col)

    def tail_sums(column: list[int]) -> list[int]:
        """``[s]``: the sum over the last ``s`` items (accumulated in C)."""
        return list(accumulate(reversed(column), initial=0))

    tail_items, tail_tokens, tail_chars = map(tail_sums, (item_col, token_col, char_col))
    cap_items = limits.get("max_items", 1 << 62) - base_items
    cap_tokens = limits.get("max_tokens", 1 << 62) - base_tokens
    cap_chars = limits.get("max_chars", 1 << 62) - base_chars
    # walk from the newest cut back; stop at the first one over a limit
    best = len(cut_starts) - 1
    for k in range(len(cut_starts) - 1, -1, -1):
        size = n - cut_starts[k]
        if (
            tail_items[size] > cap_items
            or tail_tokens[size] > cap_tokens
            or tail_chars[size] > cap_chars
        ):
            break
        best = k
    return best


def _gallop() -> Iterator[int]:
    """Probe steps 1, 1, 2, 4, ...: guesses are usually right or off by one."""
    yield 1
    step = 1
    while True:
        yield step
        step *= 2


def first_true_near(lo: int, hi: int, predicate: Callable[[int], bool], guess: int) -> int | None:
    """Smallest k in [lo, hi] with predicate(k), for a predicate monotone in k (false...true),
    probing outward from ``guess``: close guesses need few (expensive) predicate calls. Returns
    exactly what a binary search over [lo, hi] would."""
    if lo > hi:
        return None
    g = min(max(guess, lo), hi)
    steps = _gallop()
    if predicate(g):
        true_at, false_at = g, lo - 1
        while true_at > lo:
            probe = max(true_at - next(steps), lo)
            if predicate(probe):
                true_at = probe
            else:
                false_at = probe
                break
    else:
        false_at = g
        while True:
            if false_at == hi:
                return None
            probe = min(false_at + next(steps), hi)
            if predicate(probe):
                true_at = probe
                break
            false_at = probe
    lo, hi = false_at + 1, true_at
    while lo < hi:
        mid = (lo + hi) // 2
        if predicate(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def tight_cut(fits: Callable[[int], bool], *, last: int, split: int, guess: int) -> int | None:
    """The earliest fitting candidate in ``[0, last]``, ``None`` if none fits. In anthropic a
    selection starting before the whole mandatory part may drop the leading continuation
    message, so cost is monotone only on each side of ``split``: the two segments are
    searched separately, earliest first."""
    for lo, hi in ((0, split - 1), (split, last)):
        found = first_true_near(lo, hi, fits, guess)
        if found is not None:
            return found
    return None


def filler_cut(
    bare_fits: Callable[[int, bool], bool],
    opens_with_filler: Callable[[int], bool],
    *,
    first: int,
    last: int,
    guess: int,
) -> tuple[int | None, int | None]:
    """The earliest fitting candidate in ``[first, last]`` for a format that puts a filler
    first where a payload would open on the model's side, and the earliest candidate there
    whose bare payload fits (``None`` for either when there is none).

    ``bare_fits(k, room)``: whether candidate ``k``'s payload without its filler fits every
    limit (with ``room``: leaving room for a filler too); monotone in ``k``, as any bare
    payload is. ``opens_with_filler(k)``: whether its payload begins with the filler. With
    k1 the earliest bare fit and k2 the earliest bare fit with room, nothing before k1 fits,
    from k1 on a candidate opening on the user's side fits, and one opening with the filler
    fits from k2 on: the answer is the first candidate from k1 that opens on the user's side
    or k2, whichever comes first. The candidates between k1 and k2 have bare costs within one
    filler of the limits, so they are few."""
    k1 = first_true_near(first, last, lambda k: bare_fits(k, False), guess)
    if k1 is None or not opens_with_filler(k1):
        return k1, k1
    k2 = first_true_near(k1, last, lambda k: bare_fits(k, True), k1 + 1)
    for k in range(k1 + 1, last + 1 if k2 is None else k2):
        if not opens_with_filler(k):
            return k, k1
    return k2, k1
