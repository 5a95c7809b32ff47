"""A KMS on the host's loopback for the node to reach at 10.0.2.2: moto's
server for AWS, the loopback emulators for Alibaba, Tencent and Huawei.
Each can be stopped and brought back with the same master keys, which is
how the fault tests make KMS unreachable."""

from __future__ import annotations

from pathlib import Path

import pytest
from ansible.plugins.loader import init_plugin_loader
from ansible.utils.collection_loader import AnsibleCollectionConfig

ROOT = Path(__file__).resolve().parents[4]
# Through Ansible's own collection loader, as tests/unit/conftest.py does: a
# plain sys.path entry would leave gpufleet.cloud without its metadata for
# the CLI's drift model, which a lab run that collects both imports after.
if AnsibleCollectionConfig.collection_finder is None:
    init_plugin_loader([str(ROOT / "collections"), str(ROOT / ".collections")])

from ansible_collections.gpufleet.cloud.plugins.module_utils import _kms_client  # noqa: E402
from ansible_collections.gpufleet.cloud.plugins.module_utils._kms_envelope import Envelope  # noqa: E402
from tests.emulators import kms_aliyun, kms_common, kms_huawei, kms_tencent  # noqa: E402
from tests.integration.storage_nodes import HOST_LOOPBACK  # noqa: E402
from tests.support.ports import free_port  # noqa: E402

CREDS = {"access_key": "AKIDlabtest", "secret_key": "lab-test-secret"}
EMULATORS = {"aliyun": kms_aliyun.AliyunKmsHandler, "tencent": kms_tencent.TencentKmsHandler,
             "huawei": kms_huawei.HuaweiKmsHandler}


class HostKms:
    def __init__(self, provider):
        self.provider = provider
        self.port = free_port()
        self.keys = ["gpufleet-key-1", "gpufleet-key-2"]
        self._server = None
        self._keyring = None
        self.start()
        if provider == "aws":
            import boto3

            kms = boto3.client("kms", endpoint_url=self.host_url, region_name="us-east-1",
                               aws_access_key_id=CREDS["access_key"], aws_secret_access_key=CREDS["secret_key"])
            self.keys = [kms.create_key()["KeyMetadata"]["KeyId"], kms.create_key()["KeyMetadata"]["KeyId"]]

    @property
    def host_url(self):
        return f"http://127.0.0.1:{self.port}"

    def start(self):
        if self.provider == "aws":
            from moto.server import ThreadedMotoServer

            # A new server object each time (one cannot be restarted); moto's
            # keys live in the process, so they survive the restart.
            self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port)
            self._server.start()
            return
        server = kms_common.make_server(EMULATORS[self.provider], self.keys, self.port, keyring=self._keyring)
        self._keyring = server.keyring
        self._server = kms_common.serve_in_thread(server)

    def stop(self):
        if self.provider == "aws":
            self._server.stop()
        else:
            kms_common.stop(self._server)

    def role_vars(self, key=0):
        return {
            "encrypted_storage_kms_provider": self.provider,
            "encrypted_storage_kms_key_id": self.keys[key],
            "encrypted_storage_kms_region": "us-east-1" if self.provider == "aws" else "cn-test-1",
            "encrypted_storage_kms_endpoint": f"http://{HOST_LOOPBACK}:{self.port}",
            "encrypted_storage_kms_project_id": "0123456789abcdef" if self.provider == "huawei" else "",
            "encrypted_storage_kms_credentials": CREDS,
            "encrypted_storage_kms_retries": 2,
            "encrypted_storage_kms_retry_delay": 1,
        }

    def decrypt(self, envelope_text: str) -> bytes:
        """The data key of an envelope read from the node, asked of the
        same KMS from the host side."""
        envelope = Envelope.loads(envelope_text)
        envelope.endpoint = self.host_url
        return _kms_client.decrypt(envelope, timeout=5, **CREDS)

    def wrap_other_key(self, envelope_text: str) -> str:
        """An envelope of the same master key holding a different data key:
        the 'wrong key' fault."""
        envelope = Envelope.loads(envelope_text)
        _plaintext, other = _kms_client.generate(self.provider, envelope.key_id, envelope.key_bytes, region=envelope.region,
                                                 endpoint=self.host_url, project_id=envelope.project_id, timeout=5, **CREDS)
        other.endpoint = envelope.endpoint
        return other.dumps()


@pytest.fixture
def host_kms(request):
    kms = HostKms(request.param)
    try:
        yield kms
    finally:
        kms.stop()
