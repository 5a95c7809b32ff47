"""Running ansible-inventory from tests, and reading its JSON."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.helpers import ROOT


def ansible_inventory(env, *args):
    # The one next to this interpreter: the venv's, whatever PATH says.
    exe = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or shutil.which("ansible-inventory")
    assert exe, "ansible-inventory is not installed"
    return subprocess.run([exe, *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)


def plain(value):
    """A value of ansible-inventory's JSON without the {"__ansible_unsafe": ...}
    markers it puts around strings that came from an API."""
    if isinstance(value, dict):
        if set(value) == {"__ansible_unsafe"}:
            return value["__ansible_unsafe"]
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def cloud_env_for(cloud, url, key, secret):
    """The environment that points ``cloud``'s plugin at an emulator at
    ``url``, with the key pair given in the SDK's own variables (and the
    SDK's metadata-service lookup off where it would make one)."""
    return {
        "aws": {"GPUFLEET_AWS_ENDPOINT": url, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
                "AWS_EC2_METADATA_DISABLED": "true"},
        "aliyun": {"GPUFLEET_ALIYUN_ENDPOINT": url, "ALIBABA_CLOUD_ACCESS_KEY_ID": key,
                   "ALIBABA_CLOUD_ACCESS_KEY_SECRET": secret, "ALIBABA_CLOUD_ECS_METADATA_DISABLED": "true"},
        "tencent": {"GPUFLEET_TENCENT_ENDPOINT": url, "TENCENTCLOUD_SECRET_ID": key, "TENCENTCLOUD_SECRET_KEY": secret},
        "huawei": {"GPUFLEET_HUAWEI_ENDPOINT": url, "HUAWEICLOUD_SDK_IAM_ENDPOINT": url,
                   "HUAWEICLOUD_SDK_AK": key, "HUAWEICLOUD_SDK_SK": secret},
    }[cloud]
