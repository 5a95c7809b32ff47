"""What the guard reads on the node, with stand-ins for nvidia-smi,
systemctl and /proc: every read that cannot be done is None (unknown),
never a number or a "not active"."""

from __future__ import annotations

import os
import sys
import time

import pytest

from ...conftest import load_helper

probes = load_helper("guard", "gpufleet_guard_probes.py", "gpufleet_guard_probes")

# /proc/net/tcp rows: local 0.0.0.0:22 listening (0A), and an established
# (01) connection to local port 22 from 10.0.0.5.
HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
LISTEN_22 = "   0: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n"
ESTABLISHED_22 = "   1: 0500000A:0016 0500000A:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n"
ESTABLISHED_443 = "   2: 0500000A:01BB 0500000A:D432 01 00000000:00000000 00:00000000 00000000     0        0 3 1\n"


def test_gpu_utilization_per_gpu(fake_nvidia_smi):
    smi = fake_nvidia_smi([{"utilization.gpu": 97}, {"utilization.gpu": 0}, {"utilization.gpu": "[N/A]"},
                           {"utilization.gpu": 250}])
    assert probes.gpu_utilization(smi) == [97.0, 0.0, None, None]


@pytest.mark.parametrize("case", ["fails", "missing", "no gpus"])
def test_gpu_utilization_that_cannot_be_read_is_none(fake_nvidia_smi, tmp_path, case):
    smi = {"fails": lambda: fake_nvidia_smi(rc=9, message="NVIDIA-SMI has failed"),
           "missing": lambda: str(tmp_path / "no-such-nvidia-smi"),
           "no gpus": lambda: fake_nvidia_smi([])}[case]()
    assert probes.gpu_utilization(smi) is None


def test_gpu_utilization_from_a_hung_nvidia_smi_is_none(tmp_path):
    hung = tmp_path / "nvidia-smi"
    hung.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(30)\n")
    hung.chmod(0o755)
    started = time.monotonic()
    assert probes.gpu_utilization(str(hung), timeout=0.5) is None
    assert time.monotonic() - started < 20


def proc_net(tmp_path, tcp, tcp6=None):
    directory = tmp_path / "net"
    directory.mkdir()
    (directory / "tcp").write_text(HEADER + "".join(tcp))
    if tcp6 is not None:
        (directory / "tcp6").write_text(HEADER + "".join(tcp6))
    return str(directory)


def test_an_established_ssh_connection_is_active(tmp_path):
    assert probes.ssh_sessions(proc_net(tmp_path, [LISTEN_22, ESTABLISHED_22])) is True


def test_a_listening_sshd_and_other_connections_are_not_a_session(tmp_path):
    assert probes.ssh_sessions(proc_net(tmp_path, [LISTEN_22, ESTABLISHED_443], [LISTEN_22])) is False


def test_ssh_over_ipv6_counts(tmp_path):
    assert probes.ssh_sessions(proc_net(tmp_path, [LISTEN_22], [ESTABLISHED_22])) is True


def test_socket_tables_that_cannot_be_read_are_unknown(tmp_path):
    assert probes.ssh_sessions(str(tmp_path / "no-proc-net")) is None


def test_the_activity_file(tmp_path):
    path = tmp_path / "activity"
    now = time.time()
    assert probes.file_touched(str(path), 600, now) is False
    path.write_text("step 10\n")
    os.utime(path, (now - 30, now - 30))
    assert probes.file_touched(str(path), 600, now) is True
    os.utime(path, (now - 601, now - 601))
    assert probes.file_touched(str(path), 600, now) is False
    assert probes.file_touched(str(path / "below-a-file"), 600, now) is None  # ENOTDIR: cannot tell


def test_boot_and_uptime(tmp_path):
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text("0b1e7c1e-5a1b-4c3d-9e8f-0123456789ab\n")
    (tmp_path / "uptime").write_text("12345.67 24000.00\n")
    no_container = str(tmp_path / "no-container")
    assert probes.boot(str(tmp_path), no_container) == ("0b1e7c1e-5a1b-4c3d-9e8f-0123456789ab", 12345.67)
    (tmp_path / "uptime").write_text("garbled\n")
    assert probes.boot(str(tmp_path), no_container) is None
    assert probes.boot(str(tmp_path / "nowhere"), no_container) is None


def test_in_a_container_its_start_is_its_boot(tmp_path):
    """The kernel's boot id and uptime stay the host's when a container
    restarts; its init's start (PID 1, /proc/1/stat field 22) does not."""
    (tmp_path / "sys/kernel/random").mkdir(parents=True)
    (tmp_path / "sys/kernel/random/boot_id").write_text("0b1e7c1e-5a1b-4c3d-9e8f-0123456789ab\n")
    (tmp_path / "uptime").write_text("12345.67 24000.00\n")
    (tmp_path / "1").mkdir()
    ticks = os.sysconf("SC_CLK_TCK")
    # A command with a space and a parenthesis in it: the fields are counted
    # from the last closing parenthesis.
    fields = ["S", "0", "1", "1"] + ["0"] * 15 + [str(12000 * ticks), "0"]
    (tmp_path / "1/stat").write_text("1 (init (x) y) " + " ".join(fields) + "\n")
    marker = tmp_path / "container"
    marker.write_text("podman\n")
    boot_id, uptime = probes.boot(str(tmp_path), str(marker))
    assert boot_id == f"0b1e7c1e-5a1b-4c3d-9e8f-0123456789ab-{12000 * ticks}"
    assert uptime == pytest.approx(345.67)
    # Restarted: the same kernel, a later start, another boot.
    fields[19] = str(12300 * ticks)
    (tmp_path / "1/stat").write_text("1 (init) " + " ".join(fields) + "\n")
    (tmp_path / "uptime").write_text("12310.00 24000.00\n")
    assert probes.boot(str(tmp_path), str(marker)) == (f"0b1e7c1e-5a1b-4c3d-9e8f-0123456789ab-{12300 * ticks}",
                                                       pytest.approx(10.0))
    # init's start unreadable: the boot is unknown, not the kernel's.
    (tmp_path / "1/stat").write_text("1 (init) S 0\n")
    assert probes.boot(str(tmp_path), str(marker)) is None


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A stand-in systemctl on PATH that answers from a table."""

    def make(answers: dict[str, tuple[int, str]]):
        script = tmp_path / "bin" / "systemctl"
        script.parent.mkdir(exist_ok=True)
        script.write_text(f"#!{sys.executable}\nimport sys\nANSWERS = {answers!r}\n"
                          "rc, out = ANSWERS.get(sys.argv[-1], (4, ''))\nprint(out, end='')\nsys.exit(rc)\n")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")

    return make


def test_job_units_active_inactive_and_unknown(systemctl):
    systemctl({"train.service": (0, "active\n"), "eval.service": (3, "inactive\n"), "old.service": (3, "failed\n"),
               "odd.service": (1, "maintenance\n")})
    assert probes.unit_active("train.service") is True
    assert probes.unit_active("eval.service") is False
    assert probes.unit_active("old.service") is False
    assert probes.unit_active("odd.service") is None
    assert probes.unit_active("unanswered.service") is None


def test_job_seconds_from_systemds_record(systemctl):
    entered = int((time.monotonic() - 90) * 1e6)
    systemctl({"train.service": (0, f"ActiveState=active\nActiveEnterTimestampMonotonic={entered}\n"),
               "eval.service": (0, "ActiveState=inactive\nActiveEnterTimestampMonotonic=0\n"),
               "odd.service": (0, "ActiveState=active\nActiveEnterTimestampMonotonic=soon\n")})
    assert probes.job_seconds("train.service") == pytest.approx(90, abs=5)
    assert probes.job_seconds("eval.service") is None
    assert probes.job_seconds("odd.service") is None
    assert probes.job_seconds("unanswered.service") is None
