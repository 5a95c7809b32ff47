from __future__ import annotations

import io
import json
import re

import pytest

from ...conftest import ROOT, load_helper

cli = load_helper("_kms_client", "gpufleet_kms_cli.py", "gpufleet_kms_cli")
# The helper's own classes: on a node they come from the gpufleet_kms copy.
Envelope, KmsError = cli.Envelope, cli.KmsError


@pytest.fixture
def envelope(tmp_path):
    path = tmp_path / "e.envelope"
    path.write_text(Envelope("aws", "k", "Y2lwaGVy", 4).dumps())
    return str(path)


class Pipe(io.BytesIO):
    def __init__(self, tty=False):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def fake_decrypt(outcomes, seen=None):
    outcomes = list(outcomes)

    def decrypt(envelope, **credentials):
        if seen is not None:
            seen.append(credentials)
        outcome = outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return decrypt


def test_unreachable_kms_is_retried_then_succeeds(monkeypatch, envelope):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([KmsError("unreachable", "down"), b"k3y!"]))
    sleeps, logs = [], []
    assert cli.decrypt_with_retries(envelope, retries=3, delay=2, log=logs.append, sleep=sleeps.append) == b"k3y!"
    assert sleeps == [2] and "attempt 1/3" in logs[0]


def test_refusal_is_not_retried(monkeypatch, envelope):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([KmsError("refused", "wrong key")]))
    with pytest.raises(KmsError):
        cli.decrypt_with_retries(envelope, retries=5, delay=0, sleep=lambda s: pytest.fail("retried a refusal"))


def test_retries_are_bounded(monkeypatch, envelope):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([KmsError("unreachable", "down")] * 3))
    with pytest.raises(KmsError):
        cli.decrypt_with_retries(envelope, retries=3, delay=0, sleep=lambda s: None)


def test_decrypt_writes_the_key_to_the_pipe_only(monkeypatch, envelope, capsys):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([b"\x00\x01\xfe\xff"]))
    out = Pipe()
    assert cli.main(["decrypt", envelope, "--encoding", "hex"], stdout=out) == 0
    assert out.getvalue() == b"0001feff\n"
    assert "0001feff" not in capsys.readouterr().err


def test_decrypt_refuses_a_terminal(monkeypatch, envelope):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([]))
    assert cli.main(["decrypt", envelope], stdout=Pipe(tty=True)) == 2


def test_check_prints_no_key(monkeypatch, envelope, capsys):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([b"secretkey"]))
    out = Pipe()
    assert cli.main(["check", envelope], stdout=out) == 0
    assert out.getvalue() == b"" and "secretkey" not in capsys.readouterr().err


def test_credentials_file_reaches_the_adapter(monkeypatch, envelope, tmp_path):
    creds = tmp_path / "c.json"
    creds.write_text(json.dumps({"access_key": "AK", "secret_key": "SK", "unused": "x"}))
    seen = []
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([b"k"], seen))
    assert cli.main(["decrypt", envelope, "--credentials", str(creds)], stdout=Pipe()) == 0
    assert seen == [{"access_key": "AK", "secret_key": "SK"}]


def test_failure_exits_1_with_the_reason(monkeypatch, envelope, capsys):
    monkeypatch.setattr(cli, "decrypt", fake_decrypt([KmsError("refused", "AccessDenied")]))
    assert cli.main(["decrypt", envelope, "--retries", "1"], stdout=Pipe()) == 1
    assert "AccessDenied" in capsys.readouterr().err


def test_node_sdk_pins_match_the_tested_versions():
    """The SDKs installed on nodes are the versions the tests ran with."""
    pins = dict(
        line.split("==") for line in (ROOT / "requirements" / "constraints.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    pins = {name.lower().replace("_", "-"): version for name, version in pins.items()}
    role_vars = (ROOT / "roles" / "_kms_client" / "vars" / "main.yml").read_text()
    found = re.findall(r"([A-Za-z0-9_.-]+)==([0-9.]+)", role_vars)
    assert len(found) >= 8
    for name, version in found:
        assert pins.get(name.lower().replace("_", "-")) == version, name
