"""RetentionRepository: the SQL of expiry, pruning, complete erasure, the erasure audit and
storage accounting, one module per concern, joined here into the one repository the services use:

- ``base``: the tables that hold a session's rows, row sizes, the bounded deletes;
- ``expiry``: expired sessions, the start of their erasure, the review of live ones (TTLs);
- ``tenants``: tenant tombstones and the lock that orders creates before a tenant's erasure;
- ``pruning``: a live session's old archive, events and automatic snapshots;
- ``erasure``: every row of a session, of the sweep's batch, of a tenant;
- ``audit``: the erasure records;
- ``storage``: rows and bytes per session and per tenant;
- ``search_index``: SQLite's FTS5 merge, which removes erased text from the index's pages.
"""

from __future__ import annotations

from app.domain.retention import ErasedCounts
from app.store.retention.audit import ErasureAudit
from app.store.retention.base import SESSION_TABLES, Pruned
from app.store.retention.erasure import ErasureQueries
from app.store.retention.expiry import ExpiryQueries, ReviewRow
from app.store.retention.pruning import PruningQueries
from app.store.retention.search_index import SearchIndexMerge
from app.store.retention.storage import StorageAccounting, Usage
from app.store.retention.tenants import TenantErasureQueries, tenant_lock_name

__all__ = [
    "SESSION_TABLES",
    "ErasedCounts",
    "Pruned",
    "RetentionRepository",
    "ReviewRow",
    "Usage",
    "tenant_lock_name",
]


class RetentionRepository(
    ExpiryQueries,
    TenantErasureQueries,
    PruningQueries,
    ErasureQueries,
    ErasureAudit,
    StorageAccounting,
    SearchIndexMerge,
):
    """Every retention statement on one connection (``RetentionRepository(db)``)."""
