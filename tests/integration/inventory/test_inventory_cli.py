"""ansible-inventory, as a user runs it, against the four emulators.

The emulators run in this test process on 127.0.0.1; ansible-inventory
runs as a subprocess with the repository's ansible.cfg, endpoints and
dummy credentials from the environment, exactly as a real account's would
come (no test-only options in the inventory files).
"""

from __future__ import annotations

import json

import pytest
import yaml

from tests.emulators import fleet
from gpufleet.lab._cloud.aliyun import AliyunEmulator
from tests.emulators.aws import AwsEmulator
from tests.emulators.huawei import HuaweiEmulator
from tests.emulators.tencent import TencentEmulator
from tests.integration.inventory.cli import ansible_inventory, cloud_env_for, plain
from tests.support.nodes import ROOT, ansible_env

pytestmark = pytest.mark.inventory

MULTICLOUD = ROOT / "inventories" / "multicloud"
EMULATORS = {"aliyun": AliyunEmulator, "tencent": TencentEmulator, "huawei": HuaweiEmulator, "aws": AwsEmulator}
FILES = {"aliyun": "aliyun_ecs.yml", "tencent": "tencent_cvm.yml", "huawei": "huawei_ecs.yml", "aws": "aws_ec2.yml"}
RECORD_VARS = {"gpufleet_" + k for k in (
    "provider", "region", "zone", "instance_id", "instance_type", "name", "state",
    "private_ip", "public_ip", "gpu", "spot", "charge_type", "tags", "rdma")}


def regions_of(cloud):
    return yaml.safe_load((MULTICLOUD / FILES[cloud]).read_text())["regions"]


@pytest.fixture(scope="module")
def clouds():
    """The four emulators, each seeded over the regions its inventory file names."""
    running = {}
    try:
        for cloud, emulator_class in EMULATORS.items():
            emulator = emulator_class(regions=regions_of(cloud)).start()
            running[cloud] = emulator
            emulator.seed(fleet.generate(emulator.CATALOG, regions_of(cloud), 12, seed=len(cloud),
                                         prefix=None if cloud == "aws" else cloud))
        yield running
    finally:
        for emulator in running.values():
            emulator.stop()


def cloud_env(clouds):
    env = ansible_env()
    pairs = {"aliyun": ("LTAI-test", "test-secret"), "tencent": ("AKID-test", "test-secret"),
             "huawei": ("HW-test", "test-secret"), "aws": ("AKIA-test", "test-secret")}
    for cloud, (key, secret) in pairs.items():
        env.update(cloud_env_for(cloud, clouds[cloud].url, key, secret))
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_EC2"):
        env.pop(name, None)
    return env


def running_gpu_ids(emulator):
    return {i["instance_id"] for region in emulator.instances.values() for i in region
            if i["state"] == "running" and fleet.has_gpu(emulator.CATALOG.get(i["instance_type"], {}), i["instance_type"])}


def test_multicloud_graph_lists_every_cloud_with_the_same_variables(clouds):
    env = cloud_env(clouds)
    graph = ansible_inventory(env, "-i", "inventories/multicloud", "--graph")
    assert graph.returncode == 0, graph.stderr
    for cloud in EMULATORS:
        assert "@cloud_%s:" % cloud in graph.stdout
    assert "@spot:" in graph.stdout and "@gpu_" in graph.stdout

    listed = ansible_inventory(env, "-i", "inventories/multicloud", "--list")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    hostvars = data["_meta"]["hostvars"]
    for cloud, emulator in clouds.items():
        members = data["cloud_" + cloud]["hosts"]
        ids = {plain(hostvars[h]["gpufleet_instance_id"]) for h in members}
        assert ids == running_gpu_ids(emulator)
        for host in members:
            assert RECORD_VARS <= set(hostvars[host])
            model = plain(hostvars[host]["gpufleet_gpu"]["model"])
            assert host in data["gpu_" + model.lower()]["hosts"]


@pytest.mark.parametrize("cloud", sorted(EMULATORS))
def test_each_cloud_folder_lists_its_cloud(clouds, cloud):
    listed = ansible_inventory(cloud_env(clouds), "-i", "inventories/" + cloud, "--list")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert set(data) >= {"cloud_" + cloud, "region_" + regions_of(cloud)[0].replace("-", "_")}


def test_a_failed_region_warns_and_strict_regions_fails_the_command(clouds, tmp_path):
    env = cloud_env(clouds)
    down = regions_of("tencent")[1]
    clouds["tencent"].faults.failed_regions.add(down)
    try:
        lenient = ansible_inventory(env, "-i", "inventories/tencent", "--graph")
        assert lenient.returncode == 0, lenient.stderr
        assert "region %s failed" % down in lenient.stderr and "InternalError" in lenient.stderr
        assert "@cloud_tencent:" in lenient.stdout

        config = yaml.safe_load((MULTICLOUD / FILES["tencent"]).read_text())
        config["strict_regions"] = True
        (tmp_path / FILES["tencent"]).write_text(yaml.safe_dump(config))
        strict = ansible_inventory(env, "-i", str(tmp_path / FILES["tencent"]), "--graph")
        assert strict.returncode != 0
        assert "region %s failed" % down in strict.stderr and "strict_regions is on" in strict.stderr
    finally:
        clouds["tencent"].faults.failed_regions.clear()


def test_credentials_never_reach_the_output(clouds):
    env = cloud_env(clouds)
    clouds["aliyun"].faults.failed_regions.add(regions_of("aliyun")[0])
    try:
        run = ansible_inventory(env, "-i", "inventories/aliyun", "--list", "-vvv")
    finally:
        clouds["aliyun"].faults.failed_regions.clear()
    assert run.returncode == 0, run.stderr
    assert "test-secret" not in run.stdout + run.stderr
    assert "LTAI-test" not in run.stdout + run.stderr


LIST_ACTIONS = {"aliyun": "DescribeInstances", "tencent": "DescribeInstances", "huawei": "ListServersDetails",
                "aws": "DescribeInstances"}


@pytest.mark.parametrize("cloud", sorted(EMULATORS))
def test_a_failed_listing_page_fails_its_region_and_the_exit_code_follows_strict_regions(clouds, cloud, tmp_path):
    env = cloud_env(clouds)
    broken, healthy = regions_of(cloud)[:2]
    faults = clouds[cloud].faults
    action = LIST_ACTIONS[cloud]
    config = yaml.safe_load((MULTICLOUD / FILES[cloud]).read_text())
    try:
        faults.fail_page(broken, action, 1)
        lenient = ansible_inventory(env, "-i", "inventories/" + cloud, "--list")
        assert lenient.returncode == 0, lenient.stderr
        # Warnings may be wrapped across lines.
        said = " ".join(lenient.stderr.split())
        assert "region %s failed" % broken in said and "%s page 1 failed" % action in said
        hostvars = plain(json.loads(lenient.stdout)["_meta"]["hostvars"])
        regions = {v["gpufleet_region"] for v in hostvars.values()}
        assert broken not in regions and healthy in regions

        config["strict_regions"] = True
        (tmp_path / FILES[cloud]).write_text(yaml.safe_dump(config))
        faults.fail_page(broken, action, 1)
        strict = ansible_inventory(env, "-i", str(tmp_path / FILES[cloud]), "--list")
        assert strict.returncode != 0
        said = " ".join(strict.stderr.split())
        assert "%s page 1 failed" % action in said and "strict_regions is on" in said
    finally:
        faults.fail_page(broken, action, None)
