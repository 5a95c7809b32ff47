# -*- coding: utf-8 -*-
# Copyright (c) gpufleet developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fingerprints of the primary keys in an OpenPGP public key file.

A repository's signing key is pinned by its fingerprint. The fingerprint is
a hash of the key's public-key packet (RFC 9580, section 5.5.4), so it can
be computed here from the file itself, without gpg on the node and without
trusting what the file says about itself (its user IDs, a comment).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re

PUBLIC_KEY = 6

# The prefix octet and the width of the length field hashed with the body,
# by key version; version 3 keys (MD5 fingerprints) are long obsolete.
_FINGERPRINT_HASH = {4: (b"\x99", 2, hashlib.sha1), 5: (b"\x9a", 4, hashlib.sha256), 6: (b"\x9b", 4, hashlib.sha256)}

_ARMOR = re.compile(
    r"-----BEGIN PGP PUBLIC KEY BLOCK-----\r?\n(.*?)-----END PGP PUBLIC KEY BLOCK-----", re.DOTALL
)


class KeyFileError(ValueError):
    """The file is not an OpenPGP public key file this code can read."""


def normalise(fingerprint):
    """A fingerprint as gpg prints it with or without spaces, upper-case hex,
    or None when it is not 40 (v4) or 64 (v5, v6) hex digits."""
    text = re.sub(r"\s+", "", str(fingerprint)).upper()
    if text.startswith("0X"):
        text = text[2:]
    return text if re.match(r"^([0-9A-F]{40}|[0-9A-F]{64})$", text) else None


def dearmor(data):
    """The binary packets of an ASCII-armoured key file (or of a binary one)."""
    if not data:
        raise KeyFileError("the file is empty")
    if data[:1] and data[0] & 0x80:
        return data
    text = data.decode("ascii", errors="replace")
    blocks = _ARMOR.findall(text)
    if not blocks:
        raise KeyFileError("neither a binary key nor an ASCII-armoured PGP PUBLIC KEY BLOCK")
    packets = b""
    for block in blocks:
        # Armor headers end at the first empty line; the CRC24 line starts with '='.
        lines = block.splitlines()
        if any(":" in line for line in lines[:1]):
            lines = lines[lines.index("") + 1:] if "" in lines else []
        body = "".join(line.strip() for line in lines if line.strip() and not line.startswith("="))
        try:
            packets += base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise KeyFileError("the armoured block is not valid base64: %s" % exc) from exc
    return packets


def _packets(data):
    """(tag, body) of each packet, old and new header formats."""
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise KeyFileError("byte %d is not a packet header" % pos)
        if head & 0x40:
            tag, pos = head & 0x3F, pos + 1
            if pos >= len(data):
                raise KeyFileError("truncated packet header")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= len(data):
                    raise KeyFileError("truncated packet header")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5
            else:
                # Partial body lengths are for data packets, never for keys.
                raise KeyFileError("a partial-length packet in a key file")
        else:
            tag, kind, pos = (head >> 2) & 0x0F, head & 0x03, pos + 1
            if kind == 3:
                length = len(data) - pos
            else:
                width = (1, 2, 4)[kind]
                length, pos = int.from_bytes(data[pos:pos + width], "big"), pos + width
        if pos + length > len(data):
            raise KeyFileError("a packet runs past the end of the file")
        yield tag, data[pos:pos + length]
        pos += length


def primary_fingerprints(data):
    """The fingerprint of each primary key in the file, in file order.

    Subkeys are left out: a key is pinned by its primary key, as gpg and
    NVIDIA's documentation name it.
    """
    found = []
    for tag, body in _packets(dearmor(data)):
        if tag != PUBLIC_KEY:
            continue
        version = body[0] if body else None
        if version not in _FINGERPRINT_HASH:
            raise KeyFileError("a version %s public key (only 4, 5 and 6 have fingerprints this checks)" % version)
        prefix, width, digest = _FINGERPRINT_HASH[version]
        found.append(digest(prefix + len(body).to_bytes(width, "big") + body).hexdigest().upper())
    if not found:
        raise KeyFileError("the file holds no public key")
    return found
