"""Fixtures for the collection's plugin tests.

- The collection is importable as ``ansible_collections.gpufleet.cloud``
  through Ansible's own collection loader, as it is at run time.
- No test can reach the network beyond loopback: connections to any other
  address, and name lookups of anything but localhost, fail at once. The
  SDKs' credential chains would otherwise try cloud metadata services.
- No test sees the developer's real cloud credentials or config files.
- ``emulator`` starts any of the four cloud emulators, seeded.
"""

from __future__ import annotations

import ipaddress
import socket
from pathlib import Path

import pytest
from ansible.errors import AnsibleError
from ansible.plugins.loader import init_plugin_loader

from tests.emulators import fleet
from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
# Fixtures for the KMS tests, kept in their own file.
from tests.unit.plugins.kms_fixtures import kms, kms_naming_key, kms_with_key_states  # noqa: F401 pylint: disable=unused-import

ROOT = Path(__file__).resolve().parents[3]
init_plugin_loader([str(ROOT / "collections"), str(ROOT / ".collections")])

CREDENTIAL_ENV = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2", "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
    "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN",
    "ALIBABA_CLOUD_PROFILE", "ALIBABA_CLOUD_CREDENTIALS_FILE", "ALIBABA_CLOUD_ROLE_ARN",
    "TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY",
    "HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK", "HUAWEICLOUD_SDK_PROJECT_ID", "HUAWEICLOUD_SDK_CREDENTIALS_FILE",
    "HUAWEICLOUD_SDK_IAM_ENDPOINT", "HUAWEICLOUD_SDK_IDP_ID", "HUAWEICLOUD_SDK_ID_TOKEN_FILE",
    "GPUFLEET_AWS_ENDPOINT", "GPUFLEET_ALIYUN_ENDPOINT", "GPUFLEET_TENCENT_ENDPOINT", "GPUFLEET_HUAWEI_ENDPOINT",
)


class NetworkGuardError(ConnectionRefusedError):
    pass


def _loopback(host):
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return host == "localhost"


@pytest.fixture(scope="session", autouse=True)
def loopback_only():
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def check(sock, address):
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(str(address[0])):
            raise NetworkGuardError("tests may only reach loopback, not %s" % (address[0],))

    def connect(sock, address):
        check(sock, address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        check(sock, address)
        return real_connect_ex(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not _loopback(str(host)):
            raise socket.gaierror(socket.EAI_NONAME, "tests may only resolve loopback names, not %s" % host)
        return real_getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(socket.socket, "connect", connect)
        patch.setattr(socket.socket, "connect_ex", connect_ex)
        patch.setattr(socket, "getaddrinfo", getaddrinfo)
        yield


@pytest.fixture(autouse=True)
def no_real_credentials(monkeypatch, tmp_path):
    for name in CREDENTIAL_ENV:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(home / "aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(home / "aws-credentials"))
    return home


# Per cloud: how the plugin and module options look, what each emulator needs.
CLOUDS = {
    "aliyun": {
        "emulator": AliyunEmulator,
        "regions": ["cn-hangzhou", "cn-beijing"],
        "credentials": {"access_key_id": "LTAI-test-key", "access_key_secret": "test-secret-aliyun"},
        "list_action": "DescribeInstances",
    },
    "tencent": {
        "emulator": TencentEmulator,
        "regions": ["ap-guangzhou", "ap-shanghai"],
        "credentials": {"secret_id": "AKID-test-key", "secret_key": "test-secret-tencent"},
        "list_action": "DescribeInstances",
    },
    "huawei": {
        "emulator": HuaweiEmulator,
        "regions": ["cn-north-4", "ap-southeast-1"],
        "credentials": {"access_key": "HW-test-key", "secret_key": "test-secret-huawei"},
        "list_action": "ListServersDetails",
        "iam": True,
    },
    "aws": {
        "emulator": AwsEmulator,
        "regions": ["us-east-1", "eu-west-1"],
        "credentials": {"access_key": "AKIA-test-key", "secret_key": "test-secret-aws"},
        "list_action": "DescribeInstances",
    },
}


@pytest.fixture
def start_emulator():
    """start_emulator(cloud, count=0, **generate_kwargs) -> a running, seeded emulator."""
    running = []

    def start(cloud, count=0, **kwargs):
        spec = CLOUDS[cloud]
        emulator = spec["emulator"](regions=spec["regions"]).start()
        running.append(emulator)
        if count:
            emulator.seed(fleet.generate(emulator.CATALOG, spec["regions"], count, **kwargs))
        return emulator

    yield start
    for emulator in running:
        emulator.stop()


PLUGINS = {"aliyun": "aliyun_ecs", "tencent": "tencent_cvm", "huawei": "huawei_ecs", "aws": "aws_ec2"}


def inventory_or_refusal(run_inventory, config, strict):
    """Without strict_regions, (the inventory, None); with it, the plugin
    must refuse: (None, its error's message)."""
    if not strict:
        return run_inventory(config), None
    with pytest.raises(AnsibleError) as info:
        run_inventory(config)
    message = str(info.value)
    assert "strict_regions is on" in message
    return None, message


def plugin_config(cloud, emulator, **options):
    """An inventory config for ``cloud``'s plugin pointed at ``emulator``."""
    spec = CLOUDS[cloud]
    config = {"plugin": "gpufleet.cloud." + PLUGINS[cloud], "endpoint": emulator.url, "regions": spec["regions"]}
    config.update(spec["credentials"])
    if spec.get("iam"):
        config["iam_endpoint"] = emulator.url
    config.update(options)
    return config


@pytest.fixture
def run_inventory(tmp_path):
    """run_inventory(config, cache=True) -> InventoryData, parsed the way
    ansible-inventory parses a source (then the cache is written back)."""
    from ansible.inventory.data import InventoryData
    from ansible.parsing.dataloader import DataLoader
    from ansible.plugins.loader import inventory_loader
    import yaml

    def run(config, cache=True, name="test"):
        short = config["plugin"].rsplit(".", 1)[-1]
        path = tmp_path / ("%s.%s.yml" % (name, short))
        path.write_text(yaml.safe_dump(config))
        plugin = inventory_loader.get(config["plugin"])
        assert plugin.verify_file(str(path))
        inventory = InventoryData()
        plugin.parse(inventory, DataLoader(), str(path), cache=cache)
        if getattr(plugin, "_cache", None) is not None:
            plugin.update_cache_if_changed()
        inventory.reconcile_inventory()
        return inventory

    return run


@pytest.fixture
def warnings(monkeypatch):
    """Every warning Ansible's Display is asked to show, in order."""
    from ansible.utils.display import Display

    shown = []
    monkeypatch.setattr(Display(), "warning", lambda msg, *args, **kwargs: shown.append(msg))
    return shown


FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture
def fixture_text():
    """Read a fixture file under tests/unit/plugins/fixtures."""
    def read(*parts: str) -> str:
        return FIXTURES.joinpath(*parts).read_text(encoding="utf-8")

    return read
