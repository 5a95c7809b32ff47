"""Fixtures shared by the role tests on real nodes."""

from __future__ import annotations

import pytest

from tests.integration.storage_nodes import kms_client_image


@pytest.fixture(scope="session")
def kms_node_image():
    """A Debian 12 node image with every provider's KMS SDK already
    installed by kms_client (tests/integration/storage_nodes.py)."""
    with kms_client_image() as image:
        yield image
