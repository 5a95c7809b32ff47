"""Running ansible-inventory from tests, and reading its JSON."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.nodes import ROOT


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


# What a failed inventory source prints besides our one message: ansible's
# own lines for the yaml and ini plugins, which try the file after ours
# failed (18 lines with their blank ones), and its final error. Before the
# fix the four clouds printed 28 to 73 lines, with the message at least
# twice over; the bound leaves one line of slack for ansible's wording.
MAX_LINES = 21


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
