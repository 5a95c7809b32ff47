"""Fixtures shared by the role tests on real nodes."""

from __future__ import annotations

import os

import pytest

from tests.integration.conftest import node_container
from tests.integration.roles.bad_input import every_role_outcome, every_role_started
from tests.integration.storage_nodes import kms_sdk_image


def _shared_dir(tmp_path_factory):
    # Under xdist each worker's base temp is a subdirectory of the run's:
    # the parent is the directory all of this run's workers share.
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    return shared


@pytest.fixture(scope="session")
def kms_node_image(tmp_path_factory):
    """A Debian 12 node image with every provider's KMS SDK already
    installed by _kms_client (tests/integration/storage_nodes.py), built
    once per run and shared by its pytest workers."""
    with kms_sdk_image(str(_shared_dir(tmp_path_factory))) as image:
        yield image


@pytest.fixture(scope="session")
def bad_input_outcomes(tmp_path_factory):
    """Every role's bad-input cases, run once for the whole test run
    (tests/integration/roles/bad_input.py): role -> its outcome."""
    return every_role_outcome(_shared_dir(tmp_path_factory), node_container)


@pytest.fixture(scope="session", autouse=True)
def bad_input_started(request, tmp_path_factory):
    """Every role's bad-input cases, started in the background with the
    first role test (bad_input.every_role_started), where the test run
    selected a bad-input test."""
    wanted = any("bad_input_outcomes" in getattr(item, "fixturenames", ()) for item in request.session.items)
    with every_role_started(_shared_dir(tmp_path_factory), node_container, wanted):
        yield
