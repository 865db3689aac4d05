"""The garbage collector's settings in a server process.

CPython runs a young-generation collection every 700 container allocations. A request
allocates thousands (parsed JSON, validated models, rendered messages), and the survivors of
each collection are traversed again in the older generations, which grow with what a worker
keeps: the item cache alone holds tens of thousands of decoded items. Measured on the agent
loop (append, then read the context), collection took about 1.7 ms a turn, a tenth of it.

A server process therefore freezes what start-up built (modules, schemas, the tokenizer: never
garbage, never traversed again) and collects the young generation every 50,000 allocations.
Almost everything a request allocates is freed by reference counting; the collector is only
for cycles, and the memory they can hold until the next collection is small.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000


def tune_for_serving() -> None:
    """Once, when a server process has started (``create_app()`` built by an ASGI server)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
