# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The clouds gpufleet runs on, defined once.

The discovery adapters, the GPU catalogue, the KMS envelope and the modules
read them here. The nodes get this file too: the _kms_client role copies it
into its package with the KMS adapters, and the guard copies it next to its
scripts as gpufleet_clouds.py. Role YAML (argument_specs choices, vars)
cannot import Python, so tests/unit/plugins/module_utils/test_clouds.py
fails wherever a role, plugin or playbook names another set.

It uses nothing outside the standard library, so it runs unchanged in a
module, a plugin and a node's own Python.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# In the order the documentation gives them.
CLOUDS = ("aliyun", "tencent", "huawei", "aws")

NAMES = {"aliyun": "Alibaba Cloud", "tencent": "Tencent Cloud", "huawei": "Huawei Cloud", "aws": "AWS"}


def listed(conjunction="or"):
    """The clouds as a message lists them: 'aliyun, tencent, huawei or aws'."""
    return "%s %s %s" % (", ".join(CLOUDS[:-1]), conjunction, CLOUDS[-1])
