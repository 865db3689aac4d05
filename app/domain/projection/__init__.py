"""Projection: working memory + budget -> the next-turn prompt in a wire format, with a report.

Projection never mutates memory; it is a pure function of (``ContextSource``, ``Budget``,
format), and byte-identical for the same input (prompt caches keep working). A reader new to
it can take the modules one at a time:

- ``budget``: the budget, what a read loads first (``window_hint``), what it loaded
  (``ContextSource``);
- ``analysis``: what each item is, tool groups, reasoning followers, units, the mandatory part;
- ``grid``: the stable cut's positions, clock and grid (``cut: stable``);
- ``tiers``: Tier 1 (old tool outputs cleared) and Tier 2 (old reasoning trimmed);
- ``render``: building and measuring one candidate payload;
- ``search``: estimates and the search for the earliest cut that fits;
- ``cache``: the stable prefix and the Anthropic cache breakpoints;
- ``report``: the context report;
- ``project``: ``project_context``, which runs them in that order.
"""

from .budget import (
    LIMIT_NAMES,
    Budget,
    ContextSource,
    CutName,
    LimitName,
    RecallSpec,
    WindowHint,
    unloaded_gaps,
    window_hint,
)
from .project import ProjectedContext, project_context
from .report import ContextReport
from .tiers import cleared_placeholder, missing_placeholder

__all__ = [
    "LIMIT_NAMES",
    "Budget",
    "ContextReport",
    "ContextSource",
    "CutName",
    "LimitName",
    "ProjectedContext",
    "RecallSpec",
    "WindowHint",
    "cleared_placeholder",
    "missing_placeholder",
    "project_context",
    "unloaded_gaps",
    "window_hint",
]
