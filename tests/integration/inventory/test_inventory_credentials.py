"""ansible-inventory, as a user runs it, with no credentials and with
credentials each cloud rejects: one message, said once, that names the
options and environment variables to fix, never a traceback, never a
secret, and a failed command (the repository's ansible.cfg has
any_unparsed_is_failed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.integration.helpers import ROOT
from tests.integration.inventory.cli import ansible_inventory, cloud_env_for

pytestmark = pytest.mark.inventory

# Per cloud: its inventory folder's file, the start of its one message,
# the options and variables that message must name (cli.cloud_env_for
# points the plugin at its emulator).
CLOUDS = {
    "aws": {
        "emulator": AwsEmulator,
        "file": "aws_ec2.yml",
        "missing": "no AWS credentials",
        "rejected": "AWS rejected the credentials",
        "names": ("access_key", "secret_key", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE"),
        "codes": {"unknown_key": "AuthFailure", "bad_signature": "SignatureDoesNotMatch"},
    },
    "aliyun": {
        "emulator": AliyunEmulator,
        "file": "aliyun_ecs.yml",
        "missing": "no Alibaba Cloud credentials",
        "rejected": "Alibaba Cloud rejected the credentials",
        "names": ("access_key_id", "access_key_secret", "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET"),
        "codes": {"unknown_key": "InvalidAccessKeyId.NotFound", "bad_signature": "SignatureDoesNotMatch"},
    },
    "tencent": {
        "emulator": TencentEmulator,
        "file": "tencent_cvm.yml",
        "missing": "no Tencent Cloud credentials",
        "rejected": "Tencent Cloud rejected the credentials",
        "names": ("secret_id", "secret_key", "TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY"),
        "codes": {"unknown_key": "AuthFailure.SecretIdNotFound", "bad_signature": "AuthFailure.SignatureFailure"},
    },
    "huawei": {
        "emulator": HuaweiEmulator,
        "file": "huawei_ecs.yml",
        "missing": "no Huawei Cloud credentials",
        "rejected": "Huawei Cloud rejected the credentials",
        "names": ("access_key", "secret_key", "HUAWEICLOUD_SDK_AK", "HUAWEICLOUD_SDK_SK"),
        "codes": {"unknown_key": "APIGW.0301", "bad_signature": "APIGW.0301"},
    },
}
# What a failed inventory source prints besides our one message: ansible's
# own lines for the yaml and ini plugins, which try the file after ours
# failed (18 lines with their blank ones), and its final error. Before the
# fix the four clouds printed 28 to 73 lines, with the message at least
# twice over; the bound leaves one line of slack for ansible's wording.
MAX_LINES = 21
SECRET = "s3cr3t-never-printed-0123456789"


def bare_env(home):
    """A machine without credentials: no cloud variables, an empty home, the
    repository's ansible.cfg. The SDKs' chains (metadata services
    included) run as they would on a developer's laptop."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "LANG": "C.UTF-8",
    }


def check_one_message(run, start, names, max_lines=MAX_LINES):
    """The line of ``run``'s output that says ``start``, checked: the only
    one, naming every one of ``names``, in a failed run of at most
    ``max_lines`` lines (None: -vvv, whose lines are ansible's)."""
    output = run.stdout + run.stderr
    lines = output.splitlines()
    assert run.returncode != 0, output
    assert "Traceback" not in output
    said = [line for line in lines if start in line]
    assert len(said) == 1, output
    assert output.count(start) == 1, output
    for name in names:
        assert name in said[0], (name, said[0])
    if max_lines is not None:
        assert len(lines) <= max_lines, output
    return said[0]


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_no_credentials_print_one_message_once(cloud, tmp_path):
    spec = CLOUDS[cloud]
    home = tmp_path / "home"
    home.mkdir()
    run = ansible_inventory(bare_env(home), "-i", "inventories/" + cloud, "--graph")
    check_one_message(run, spec["missing"], spec["names"])
    assert "Completely failed to parse inventory source" in run.stderr


def inventory_file(folder, cloud):
    """The cloud's inventory file from inventories/<cloud>, in ``folder``."""
    config = yaml.safe_load((ROOT / "inventories" / cloud / CLOUDS[cloud]["file"]).read_text())
    path = Path(folder) / CLOUDS[cloud]["file"]
    path.write_text(yaml.safe_dump(config))
    return path, config


@pytest.mark.parametrize("kind", ["unknown_key", "bad_signature"])
@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_rejected_credentials_name_what_to_fix_and_never_the_secret(cloud, kind, tmp_path):
    spec = CLOUDS[cloud]
    home = tmp_path / "home"
    home.mkdir()
    path, config = inventory_file(tmp_path, cloud)
    emulator = spec["emulator"](regions=config["regions"]).start()
    try:
        emulator.faults.rejected_credentials = kind
        env = {**bare_env(home), **cloud_env_for(cloud, emulator.url, "KEY-rejected", SECRET)}
        run = ansible_inventory(env, "-i", str(path), "--graph")
    finally:
        emulator.stop()
    said = check_one_message(run, spec["rejected"], spec["names"])
    assert spec["codes"][kind] in said
    # Rejected in every region: one message for the inventory, none per region.
    assert "region " not in said and " failed:" not in said
    assert emulator.count() >= 1
    assert SECRET not in run.stdout + run.stderr


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_rejected_options_name_the_options_and_never_the_secret(cloud, tmp_path):
    """The same refusal, of the key pair set in the inventory file: the
    message says the options are what to correct."""
    spec = CLOUDS[cloud]
    home = tmp_path / "home"
    home.mkdir()
    path, config = inventory_file(tmp_path, cloud)
    key_option, secret_option = spec["names"][:2]
    config.update({key_option: "KEY-in-the-file", secret_option: SECRET})
    path.write_text(yaml.safe_dump(config))
    emulator = spec["emulator"](regions=config["regions"]).start()
    try:
        emulator.faults.rejected_credentials = "unknown_key"
        # The endpoint from the environment, the keys from the file only.
        env = {**bare_env(home), **{k: v for k, v in cloud_env_for(cloud, emulator.url, "unused", "unused").items()
                                    if k.endswith(("ENDPOINT", "METADATA_DISABLED"))}}
        run = ansible_inventory(env, "-i", str(path), "--list", "-vvv")
    finally:
        emulator.stop()
    # -vvv adds the SDK's own error as the detail, masked like the message.
    said = check_one_message(run, spec["rejected"], spec["names"][:4], max_lines=None)
    assert "of the %s and %s options" % (key_option, secret_option) in said
    assert SECRET not in run.stdout + run.stderr
