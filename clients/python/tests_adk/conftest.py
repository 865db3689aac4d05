"""The ADK adapter's tests run in their own environment (``.venv-adk``: google-adk pins
versions below the service's), against the server at ``SM_URL`` (key ``SM_API_KEY``):
``tests/clients/test_adk_adapter.py`` starts one server per backend and runs this package
against each."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from session_memory_client import AsyncSessionMemoryClient
from session_memory_client.adk import ServiceSessionService


@pytest.fixture
async def client() -> AsyncIterator[AsyncSessionMemoryClient]:
    async with AsyncSessionMemoryClient(
        os.environ["SM_URL"], api_key=os.environ.get("SM_API_KEY")
    ) as client:
        yield client


@pytest.fixture
def namespace() -> str:
    """Each test's own id namespace, so that tests on one server never see each other."""
    return f"adk-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def service(client: AsyncSessionMemoryClient, namespace: str) -> ServiceSessionService:
    return ServiceSessionService(client, namespace=namespace)
