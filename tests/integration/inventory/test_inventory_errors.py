"""ansible-inventory, as a user runs it, with no credentials, with
credentials each cloud rejects, and with the plugins' other errors (a
region failed under strict_regions, every region failed, an option that
does not exist, an option Ansible refuses): one message, said once, that
names what to fix, never a traceback, never a secret, and a failed command
(the repository's ansible.cfg has any_unparsed_is_failed)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.integration.inventory.cli import MAX_LINES, ansible_inventory, bare_env, check_one_message, cloud_env_for
from tests.support.nodes import ROOT

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
SECRET = "s3cr3t-never-printed-0123456789"


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


def run_failing(cloud, tmp_path, changes, down=0):
    """ansible-inventory --graph of the cloud's inventory file with
    ``changes`` to its configuration, against its emulator with the first
    ``down`` of its regions failing (None: every one); keys the emulator
    takes. Returns the run and the regions."""
    spec = CLOUDS[cloud]
    home = tmp_path / "home"
    home.mkdir()
    path, config = inventory_file(tmp_path, cloud)
    config.update({"retries": 0, **changes})
    path.write_text(yaml.safe_dump(config))
    emulator = spec["emulator"](regions=config["regions"]).start()
    try:
        emulator.faults.failed_regions.update(config["regions"][:down])
        env = {**bare_env(home), **cloud_env_for(cloud, emulator.url, "KEY-taken", "secret-taken")}
        return ansible_inventory(env, "-i", str(path), "--graph"), config["regions"]
    finally:
        emulator.stop()


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_region_failed_under_strict_regions_is_said_once(cloud, tmp_path):
    run, regions = run_failing(cloud, tmp_path, {"strict_regions": True}, down=1)
    check_one_message(run, "region %s failed" % regions[0], ["strict_regions is on"])


@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_every_region_failed_is_said_once_after_one_warning_per_region(cloud, tmp_path):
    run, regions = run_failing(cloud, tmp_path, {}, down=None)
    # One warning per region, each said once, then the one error.
    check_one_message(run, "every region failed", regions, max_lines=MAX_LINES + len(regions))
    for region in regions:
        assert run.stderr.count("region %s failed" % region) == 1, run.stderr


@pytest.mark.parametrize(("changes", "start", "names"), [
    ({"strict_region": True}, "unknown option 'strict_region'", ["did you mean 'strict_regions'?"]),
    # Ansible's own check of an option's type, turned into the same one line.
    ({"workers": "many"}, "option 'workers': expected an integer, got 'many'", []),
], ids=["unknown-option", "wrong-type"])
@pytest.mark.parametrize("cloud", sorted(CLOUDS))
def test_a_bad_option_is_said_once(cloud, changes, start, names, tmp_path):
    run = run_failing(cloud, tmp_path, changes)[0]
    said = check_one_message(run, start, names)
    assert said.count(CLOUDS[cloud]["file"].split(".")[0]) == 1, said
