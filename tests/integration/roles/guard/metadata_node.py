"""A cloud's instance metadata service on a lab node's loopback
(tests/emulators/instance_metadata.py, standard library only), as a
systemd unit: the guard on the node reads its spot notice from there."""

from __future__ import annotations

from tests.integration.storage_nodes import put, sh
from tests.support.nodes import ROOT

MODULES = ("__init__.py", "kms_common.py", "instance_metadata.py")


def start_metadata_service(name: str, cloud: str, port: int, notice_file: str, fault_file: str | None = None,
                           unit: str | None = None) -> None:
    """The service's notice is notice_file's content while that file
    exists; its fault (500, garbage, drop, hang), fault_file's."""
    sh(name, "mkdir -p /opt/gft/tests/emulators && touch /opt/gft/tests/__init__.py")
    for module in MODULES:
        put(name, ROOT / "tests" / "emulators" / module, f"/opt/gft/tests/emulators/{module}")
    faults = f" --fault-file {fault_file}" if fault_file else ""
    sh(name, f"systemd-run --unit {unit or 'gft-metadata-' + cloud} --property WorkingDirectory=/opt/gft"
             f" /usr/bin/python3 -m tests.emulators.instance_metadata {cloud} --port {port}"
             f" --notice-file {notice_file}{faults}")
