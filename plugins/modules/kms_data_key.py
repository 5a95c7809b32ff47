#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# Modules carry GPLv3, as ansible-test's validate-modules requires of every
# module; the rest of the collection is Apache-2.0.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kms_data_key
short_description: Generate, decrypt and re-wrap KMS data keys (envelope encryption)
version_added: 0.1.0
description:
  - Works with data keys from the cloud's key management service on
    AWS (KMS), Alibaba Cloud (KMS), Tencent Cloud (KMS) and Huawei Cloud (DEW KMS).
  - O(operation=generate) asks KMS for a new data key and stores only the
    KMS-encrypted copy, as an envelope file at O(path). The plaintext key is
    dropped unless O(return_plaintext) asks for it. An existing envelope is
    never replaced, so the key is generated once.
  - O(operation=reencrypt) wraps the same data key under O(key_id) (key
    rotation), so data encrypted with the key needs no re-encryption. The new
    envelope is checked to decrypt to the same key before it replaces the old one.
  - O(operation=decrypt) asks KMS to decrypt the envelope; it returns the
    plaintext only with O(return_plaintext=true), and only in a task with
    C(no_log) set to true.
  - Credentials come from the options, else from each SDK's own chain
    (environment, profile files, the instance's role).
author: gpufleet developers (@gpufleet)
requirements:
  - boto3 for O(provider=aws)
  - alibabacloud_kms20160120 for O(provider=aliyun)
  - tencentcloud-sdk-python-kms for O(provider=tencent)
  - huaweicloudsdkkms for O(provider=huawei)
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details:
      - generate and reencrypt report what they would do without calling KMS.
      - decrypt only reads, and also runs in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: full
    details: The diff shows the provider and the key id the envelope is wrapped under, never key material.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
options:
  provider:
    description: The cloud whose KMS holds the master key.
    type: str
    required: true
    choices: [aliyun, tencent, huawei, aws]
  operation:
    description: What to do with the data key.
    type: str
    choices: [generate, decrypt, reencrypt]
    default: generate
  path:
    description:
      - Envelope file on the target. O(operation=generate) creates it (mode
        0600) when absent; the other operations read it, and reencrypt
        replaces it.
      - Required for O(operation=reencrypt) and for decrypt unless O(envelope) is given.
    type: path
  envelope:
    description: Envelope document (JSON) to decrypt instead of reading O(path).
    type: str
  key_id:
    description:
      - The KMS master key (id, ARN or alias) that wraps the data key.
      - Required for O(operation=generate) and O(operation=reencrypt).
    type: str
  key_bytes:
    description: Length of a new data key in bytes. 32 suits LUKS2 and restic; fscrypt policies need 64.
    type: int
    choices: [16, 32, 64]
    default: 32
  region:
    description: Region of the KMS. Recorded in the envelope so the node can reach the same KMS at boot.
    type: str
  endpoint:
    description:
      - KMS endpoint, e.g. a VPC endpoint. A bare host name means HTTPS.
        Empty means the SDK's default for O(region).
    type: str
  project_id:
    description: Huawei Cloud project id of the region (DEW's API paths need it).
    type: str
  access_key:
    description: Access key id. Empty uses the SDK's credential chain.
    type: str
  secret_key:
    description: Secret access key that goes with O(access_key).
    type: str
  security_token:
    description: Session token for temporary credentials.
    type: str
  timeout:
    description: Seconds to wait for KMS to connect and to answer.
    type: int
    default: 10
  force:
    description:
      - With O(operation=reencrypt), re-wrap even when the envelope already names O(key_id).
      - This moves the envelope to the key's newest version after KMS rotated the key.
    type: bool
    default: false
  return_plaintext:
    description:
      - Return the plaintext data key, base64-encoded, as RV(plaintext).
      - Refused unless the task sets C(no_log) to true, so the key cannot reach a log or a diff.
    type: bool
    default: false
notes:
  - The envelope holds the provider, the key id, the region, the endpoint and
    the ciphertext; nothing in it is secret.
seealso:
  - name: Envelope encryption (AWS KMS)
    description: How a data key is wrapped by a KMS key.
    link: https://docs.aws.amazon.com/kms/latest/developerguide/kms-cryptography.html#enveloping
"""

EXAMPLES = r"""
- name: Generate the data key of the data volume once
  gpufleet.cloud.kms_data_key:
    provider: aws
    region: us-east-1
    key_id: alias/gpufleet-storage
    path: /etc/gpufleet/kms/data.envelope

- name: Rotate to a new master key without touching the volume
  gpufleet.cloud.kms_data_key:
    provider: aliyun
    region: cn-hangzhou
    operation: reencrypt
    key_id: key-hzz6f1cb66fa42qo0001
    path: /etc/gpufleet/kms/data.envelope

- name: Decrypt for a one-off import (the key stays out of every log)
  gpufleet.cloud.kms_data_key:
    provider: huawei
    operation: decrypt
    path: /etc/gpufleet/kms/data.envelope
    return_plaintext: true
  no_log: true
  register: data_key
"""

RETURN = r"""
envelope:
  description: The envelope (no secret in it).
  returned: success, except generate in check mode when the envelope is absent
  type: dict
  sample:
    format: gpufleet-kms-envelope/1
    provider: aws
    key_id: alias/gpufleet-storage
    key_bytes: 32
    region: us-east-1
    ciphertext: AQIDAHh...
key_id:
  description: The master key the envelope is wrapped under after this task.
  returned: always
  type: str
  sample: alias/gpufleet-storage
plaintext:
  description: The data key, base64-encoded.
  returned: when O(return_plaintext=true) and a key was generated or decrypted
  type: str
"""

import base64
import hashlib
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.cloud.plugins.module_utils import _kms_client
from ansible_collections.gpufleet.cloud.plugins.module_utils._clouds import CLOUDS
from ansible_collections.gpufleet.cloud.plugins.module_utils._kms_envelope import Envelope, KmsError, write_private


def _connection(params):
    return dict(region=params["region"], endpoint=params["endpoint"], project_id=params["project_id"])


def _credentials(params):
    return dict(
        access_key=params["access_key"],
        secret_key=params["secret_key"],
        security_token=params["security_token"],
        timeout=params["timeout"],
    )


def _read_envelope(module):
    params = module.params
    if params["envelope"]:
        envelope = Envelope.loads(params["envelope"])
    else:
        envelope = Envelope.load(params["path"])
    if envelope.provider != params["provider"]:
        module.fail_json(msg="the envelope is for provider %s, not %s" % (envelope.provider, params["provider"]))
    return envelope


def _plaintext_result(module, plaintext):
    if module.params["return_plaintext"]:
        return {"plaintext": base64.b64encode(plaintext).decode("ascii")}
    return {}


def generate(module):
    params = module.params
    path = params["path"]
    if path and os.path.exists(path):
        # Generated once: an existing envelope is the volume's key, and a new
        # one would lock the data away for good.
        envelope = Envelope.load(path)
        if envelope.key_id != params["key_id"]:
            module.warn(
                "%s is wrapped under %s, not %s; it is kept. Use operation=reencrypt to move it to the new key."
                % (path, envelope.key_id, params["key_id"])
            )
        return dict(changed=False, envelope=envelope.to_dict(), key_id=envelope.key_id)
    diff = dict(before={}, after=dict(path=path, provider=params["provider"], key_id=params["key_id"]))
    if module.check_mode:
        return dict(changed=True, key_id=params["key_id"], diff=diff)
    if path and not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg="path: the directory %s does not exist" % os.path.dirname(path))
    plaintext, envelope = _kms_client.generate(
        params["provider"], params["key_id"], params["key_bytes"], **dict(_connection(params), **_credentials(params))
    )
    if path:
        write_private(path, envelope.dumps())
    result = dict(changed=True, envelope=envelope.to_dict(), key_id=envelope.key_id, diff=diff)
    result.update(_plaintext_result(module, plaintext))
    return result


def decrypt(module):
    envelope = _read_envelope(module)
    plaintext = _kms_client.decrypt(envelope, **_credentials(module.params))
    result = dict(changed=False, envelope=envelope.to_dict(), key_id=envelope.key_id)
    result.update(_plaintext_result(module, plaintext))
    return result


def reencrypt(module):
    params = module.params
    envelope = _read_envelope(module)
    if envelope.key_id == params["key_id"] and not params["force"]:
        return dict(changed=False, envelope=envelope.to_dict(), key_id=envelope.key_id)
    diff = dict(before=dict(key_id=envelope.key_id), after=dict(key_id=params["key_id"]))
    if module.check_mode:
        return dict(changed=True, envelope=envelope.to_dict(), key_id=params["key_id"], diff=diff)
    credentials = _credentials(params)
    rewrapped = _kms_client.reencrypt(envelope, params["key_id"], **credentials)
    # Replace the envelope only once KMS has shown that the new one holds the
    # very same key; a wrong re-wrap would otherwise lock the volume for good.
    # Only digests are compared, and the keys leave memory with this frame.
    before = hashlib.sha256(_kms_client.decrypt(envelope, **credentials)).digest()
    after = hashlib.sha256(_kms_client.decrypt(rewrapped, **credentials)).digest()
    if before != after:
        module.fail_json(msg="KMS re-wrapped %s to a different key; the envelope was left unchanged" % params["path"])
    write_private(params["path"], rewrapped.dumps())
    return dict(changed=True, envelope=rewrapped.to_dict(), key_id=rewrapped.key_id, diff=diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            provider=dict(type="str", required=True, choices=list(CLOUDS)),
            operation=dict(type="str", default="generate", choices=["generate", "decrypt", "reencrypt"]),
            path=dict(type="path"),
            envelope=dict(type="str"),
            key_id=dict(type="str"),
            key_bytes=dict(type="int", default=32, choices=[16, 32, 64]),
            region=dict(type="str"),
            endpoint=dict(type="str"),
            project_id=dict(type="str"),
            access_key=dict(type="str", no_log=True),
            secret_key=dict(type="str", no_log=True),
            security_token=dict(type="str", no_log=True),
            timeout=dict(type="int", default=10),
            force=dict(type="bool", default=False),
            return_plaintext=dict(type="bool", default=False),
        ),
        required_if=[
            ("operation", "generate", ("key_id",)),
            ("operation", "reencrypt", ("key_id", "path")),
            ("operation", "decrypt", ("path", "envelope"), True),
        ],
        mutually_exclusive=[("path", "envelope")],
        required_together=[("access_key", "secret_key")],
        supports_check_mode=True,
    )
    params = module.params
    if params["return_plaintext"] and not module.no_log:
        module.fail_json(msg="return_plaintext: set no_log: true on this task, so the data key cannot reach a log")
    # decrypt and reencrypt take the project from the envelope.
    if params["provider"] == "huawei" and params["operation"] == "generate" and params["access_key"] and not params["project_id"]:
        module.fail_json(msg="project_id: Huawei Cloud KMS needs the project id with access keys")
    sdk, error = _kms_client.sdk_status(params["provider"])
    if error and not (module.check_mode and params["operation"] != "decrypt"):
        module.fail_json(msg=missing_required_lib(sdk), exception=error)
    operations = dict(generate=generate, decrypt=decrypt, reencrypt=reencrypt)
    try:
        result = operations[params["operation"]](module)
    except KmsError as exc:
        module.fail_json(msg=str(exc), kms_error=exc.kind)
    if not module._diff:
        result.pop("diff", None)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
