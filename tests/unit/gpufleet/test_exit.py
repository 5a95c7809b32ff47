"""One bitmask of exit statuses for every subcommand (gpufleet/_exit.py),
equal to the collection's drift bits, which its callback computes."""

from __future__ import annotations

from gpufleet import _exit
from gpufleet.drift import EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE
from gpufleet.drift import _command as drift_command
from gpufleet.guard import _command as guard_command


def test_the_drift_bits_are_the_collections():
    assert (_exit.OK, _exit.DRIFT, _exit.FAILED, _exit.UNREACHABLE) == (
        EXIT_CLEAN, EXIT_DRIFT, EXIT_FAILED, EXIT_UNREACHABLE)


def test_every_status_is_its_own_bit_and_usage_is_none_of_theirs():
    bits = [_exit.DRIFT, _exit.FAILED, _exit.UNREACHABLE]
    assert all(b & (b - 1) == 0 for b in bits) and len(set(bits)) == 3
    assert _exit.USAGE == 1 and not any(_exit.USAGE & b for b in bits)


def test_each_command_uses_the_one_module_and_says_so_in_its_help():
    assert drift_command.EXIT_USAGE == guard_command.EXIT_USAGE == _exit.USAGE
    assert (guard_command.EXIT_NOT_REPORTING, guard_command.EXIT_UNREACHABLE) == (_exit.FAILED, _exit.UNREACHABLE)
    for epilog in (drift_command.EPILOG, guard_command.EPILOG):
        for code in (_exit.USAGE, _exit.FAILED, _exit.UNREACHABLE):
            assert f"\n  {code}   " in epilog, (code, epilog)
