# -*- coding: utf-8 -*-
# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""gpufleet-kms: decrypt a KMS envelope on the node, for a pipe.

    gpufleet-kms decrypt ENVELOPE [--encoding raw|hex|base64] [--credentials FILE]
    gpufleet-kms check ENVELOPE [--credentials FILE]

``decrypt`` writes the data key to standard output and nowhere else, so a
caller feeds it straight into another program (restic's password command,
cryptsetup). It refuses to write to a terminal. ``check`` only proves that
KMS decrypts the envelope, and prints no key material.

Credentials come from each SDK's own chain (environment, profile, the
instance's role), or from a JSON file (0600) of access_key, secret_key and
security_token given with --credentials. Installed by the
gpufleet.cloud._kms_client role beside the gpufleet_kms package (the
collection's module_utils adapters)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import argparse
import base64
import binascii
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from gpufleet_kms._kms_client import decrypt  # noqa: E402 pylint: disable=wrong-import-position
from gpufleet_kms._kms_envelope import Envelope, KmsError  # noqa: E402 pylint: disable=wrong-import-position
from gpufleet_kms._process import retry  # noqa: E402 pylint: disable=wrong-import-position


def read_credentials(path):
    if not path:
        return {}
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        raise KmsError("invalid", "cannot read the credentials file %s: %s" % (path, exc))
    return dict((k, data.get(k)) for k in ("access_key", "secret_key", "security_token") if data.get(k))


def decrypt_with_retries(path, retries=5, delay=5.0, log=None, credentials_file=None, sleep=time.sleep):
    """Decrypt the envelope at path. An unreachable KMS is tried again (at
    boot the network or the instance's credentials may lag behind); a
    refusal is final, since asking again cannot change the answer."""
    envelope = Envelope.load(path)
    credentials = read_credentials(credentials_file)

    def attempt():
        try:
            return decrypt(envelope, **credentials)
        except KmsError as exc:
            return exc

    def tell(number, exc, wait):
        if log:
            log("attempt %d/%d: %s; trying again in %gs" % (number, retries, exc, wait))

    outcome = retry(attempt, lambda o: isinstance(o, KmsError) and o.kind == "unreachable", retries, delay,
                    sleep=sleep, log=tell)[-1]
    if isinstance(outcome, KmsError):
        raise outcome
    return outcome


def encode(key, encoding):
    if encoding == "hex":
        return binascii.hexlify(key) + b"\n"
    if encoding == "base64":
        return base64.b64encode(key) + b"\n"
    return key


def main(argv=None, stdout=None):
    parser = argparse.ArgumentParser(prog="gpufleet-kms", description=__doc__.split("\n\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("decrypt", "check"):
        cmd = sub.add_parser(name)
        cmd.add_argument("envelope")
        cmd.add_argument("--retries", type=int, default=5)
        cmd.add_argument("--retry-delay", type=float, default=5.0)
        cmd.add_argument("--credentials", help="JSON file with access_key, secret_key[, security_token]")
        if name == "decrypt":
            cmd.add_argument("--encoding", choices=["raw", "hex", "base64"], default="raw")
    args = parser.parse_args(argv)
    stdout = stdout or sys.stdout.buffer

    def log(message):
        sys.stderr.write("gpufleet-kms: %s\n" % message)

    if args.command == "decrypt" and stdout.isatty():
        log("refusing to write a data key to a terminal; pipe it into the program that needs it")
        return 2
    try:
        key = decrypt_with_retries(args.envelope, args.retries, args.retry_delay, log, args.credentials)
    except KmsError as exc:
        log("%s: %s" % (args.envelope, exc))
        return 1
    if args.command == "check":
        log("%s: KMS decrypted a %d-byte key" % (args.envelope, len(key)))
        return 0
    stdout.write(encode(key, args.encoding))
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
