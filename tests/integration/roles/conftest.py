"""Fixtures shared by the role tests on real nodes."""

from __future__ import annotations

import os

import pytest

from tests.integration.storage_nodes import kms_sdk_image


@pytest.fixture(scope="session")
def kms_node_image(tmp_path_factory):
    """A Debian 12 node image with every provider's KMS SDK already
    installed by _kms_client (tests/integration/storage_nodes.py), built
    once per run and shared by its pytest workers."""
    # Under xdist each worker's base temp is a subdirectory of the run's:
    # the parent is the directory all of this run's workers share.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    with kms_sdk_image(str(shared)) as image:
        yield image
