# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The KMS envelope: what a node stores instead of a data key.

An envelope is a small JSON document holding the data key as the cloud's
KMS encrypted it, plus what is needed to ask that KMS to decrypt it again
(provider, key id, region, endpoint). It holds nothing secret: without the
KMS and the node's credentials it is useless.

This file and the _kms_<provider> adapters import nothing from Ansible, so
the same code runs inside the kms_data_key module and in the boot-time
helper that the _kms_client role installs on the node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import tempfile

from ._clouds import CLOUDS as PROVIDERS, listed

FORMAT = "gpufleet-kms-envelope/1"
# Connection settings recorded in the envelope (never credentials).
CONNECTION_FIELDS = ("region", "endpoint", "project_id")


class KmsError(Exception):
    """A KMS call failed. ``kind`` lets callers tell faults apart:

    - ``unreachable``: no answer from the endpoint (network, DNS, timeout);
    - ``refused``: the KMS answered and refused, e.g. the ciphertext is not
      for this key, the key is disabled, or the credentials lack permission;
    - ``invalid``: the request or the stored envelope is malformed.
    """

    def __init__(self, kind, message):
        super(KmsError, self).__init__(message)
        self.kind = kind


class KmsAdapter:
    """What every provider adapter shares: its connection settings and
    credentials. Subclasses set ``name`` and implement ``connect()``,
    ``generate(key_id, key_bytes)``, ``decrypt(envelope)`` and
    ``reencrypt(envelope, key_id)``. Empty credentials mean the SDK's own
    chain (environment, profile files, the instance's role)."""

    name = "KMS"
    default_endpoint = None

    def __init__(self, region=None, endpoint=None, project_id=None, access_key=None, secret_key=None,
                 security_token=None, timeout=10):
        self.region = region
        self.endpoint = endpoint or (self.default_endpoint % {"region": region} if self.default_endpoint else None)
        self.project_id = project_id
        self.access_key = access_key or None
        self.secret_key = secret_key or None
        self.security_token = security_token or None
        self.timeout = timeout
        self.client = self.connect()

    def connect(self):
        raise NotImplementedError

    def unreachable(self, exc):
        return KmsError("unreachable", "%s is unreachable (%s): %s" % (self.name, self.endpoint or "default endpoint", exc))

    def refused(self, operation, code, message):
        return KmsError("refused", "%s refused %s: %s: %s" % (self.name, operation, code, message))


class Envelope:
    def __init__(self, provider, key_id, ciphertext, key_bytes, region=None, endpoint=None, project_id=None):
        if provider not in PROVIDERS:
            raise KmsError("invalid", "unknown KMS provider %r; expected %s" % (provider, listed()))
        if not key_id:
            raise KmsError("invalid", "the envelope has no key_id")
        if not ciphertext:
            raise KmsError("invalid", "the envelope has no ciphertext")
        self.provider = provider
        self.key_id = key_id
        self.ciphertext = ciphertext
        self.key_bytes = int(key_bytes)
        self.region = region
        self.endpoint = endpoint
        self.project_id = project_id

    def to_dict(self):
        data = {
            "format": FORMAT,
            "provider": self.provider,
            "key_id": self.key_id,
            "key_bytes": self.key_bytes,
            "ciphertext": self.ciphertext,
        }
        for field in CONNECTION_FIELDS:
            value = getattr(self, field)
            if value:
                data[field] = value
        return data

    def dumps(self):
        # Sorted and newline-terminated: rewriting an unchanged envelope
        # yields the same bytes, so idempotence checks can compare files.
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"

    def connection(self):
        return dict((field, getattr(self, field)) for field in CONNECTION_FIELDS)

    @classmethod
    def from_dict(cls, data):
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise KmsError("invalid", "not a %s document" % FORMAT)
        try:
            return cls(
                provider=data["provider"],
                key_id=data["key_id"],
                ciphertext=data["ciphertext"],
                key_bytes=data["key_bytes"],
                region=data.get("region"),
                endpoint=data.get("endpoint"),
                project_id=data.get("project_id"),
            )
        except KeyError as exc:
            raise KmsError("invalid", "the envelope lacks %s" % exc)

    @classmethod
    def loads(cls, text):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise KmsError("invalid", "the envelope is not JSON: %s" % exc)
        return cls.from_dict(data)

    @classmethod
    def load(cls, path):
        try:
            with open(path) as handle:
                text = handle.read()
        except (IOError, OSError) as exc:
            raise KmsError("invalid", "cannot read the envelope %s: %s" % (path, exc))
        return cls.loads(text)


def write_private(path, text, mode=0o600):
    """Write text to path atomically with the given mode from the start.

    The temporary file is created 0600 in the same directory and renamed
    over the target, so a reader never sees a partial envelope and a
    crash never leaves a truncated one behind."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def split_endpoint(endpoint):
    """'http://127.0.0.1:8080' -> ('http', '127.0.0.1:8080'); a bare host
    name means HTTPS, as every cloud's public and VPC endpoints are."""
    if "://" in endpoint:
        scheme, host = endpoint.split("://", 1)
        return scheme.lower(), host.rstrip("/")
    return "https", endpoint.rstrip("/")
