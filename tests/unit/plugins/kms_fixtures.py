"""KMS servers for the KMS module and client tests: moto for AWS, the
loopback emulators for the other three clouds. Imported by conftest.py."""

from __future__ import annotations

import contextlib

import pytest

from tests.emulators import kms_aliyun, kms_common, kms_huawei, kms_tencent
from tests.support.ports import REFUSED_URL

CREDS = {"access_key": "AKIDunittest", "secret_key": "unit-test-secret", "timeout": 3}
EMULATORS = {
    "aliyun": kms_aliyun.AliyunKmsHandler,
    "tencent": kms_tencent.TencentKmsHandler,
    "huawei": kms_huawei.HuaweiKmsHandler,
}


class Kms:
    """One provider's KMS for a test: connection settings, credentials, the
    two master keys, and handles to break it (disable a key, stop it)."""

    def __init__(self, provider, connection, keys, stop, disable):
        self.provider = provider
        self.connection = connection
        self.keys = keys
        self.stop = stop
        self.disable = disable


@contextlib.contextmanager
def provider_kms(provider, monkeypatch):
    if provider == "aws":
        boto3 = pytest.importorskip("boto3")
        moto = pytest.importorskip("moto")
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
            monkeypatch.delenv(name, raising=False)
        with moto.mock_aws():
            client = boto3.client("kms", region_name="us-east-1", aws_access_key_id="unit", aws_secret_access_key="test")
            keys = [client.create_key()["KeyMetadata"]["KeyId"], client.create_key()["KeyMetadata"]["KeyId"]]
            kms = Kms("aws", {"region": "us-east-1"}, keys, None, None)

            def stop():
                # moto answers in-process; a refused address does not.
                kms.connection["endpoint"] = REFUSED_URL

            kms.stop = stop
            yield kms
        return
    with kms_common.running(EMULATORS[provider], ["key-one", "key-two"]) as server:
        conn = {"region": "cn-test-1", "endpoint": f"http://127.0.0.1:{server.server_port}"}
        if provider == "huawei":
            conn["project_id"] = "0123456789abcdef"

        def stop():
            server.shutdown()
            server.server_close()
            conn["endpoint"] = REFUSED_URL

        yield Kms(provider, conn, ["key-one", "key-two"], stop, server.keyring.disabled.add)


def _entered(request, monkeypatch):
    stack = contextlib.ExitStack()
    request.addfinalizer(stack.close)
    return stack.enter_context(provider_kms(request.param, monkeypatch))


@pytest.fixture(params=["aws", "aliyun", "tencent", "huawei"])
def kms(request, monkeypatch):
    return _entered(request, monkeypatch)


@pytest.fixture(params=["aliyun", "tencent", "huawei"])
def kms_with_key_states(request, monkeypatch):
    """The KMSs that model disabled keys (moto does not)."""
    return _entered(request, monkeypatch)


@pytest.fixture(params=["aws", "huawei"])
def kms_naming_key(request, monkeypatch):
    """The KMSs whose decrypt names the master key and checks it."""
    return _entered(request, monkeypatch)
