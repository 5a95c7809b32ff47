"""The guard's own preflight checks: one message per wrong option, naming
only it (and the options it depends on), with an example that passes; and
a checkpoint hook that a spot notice's window cannot fit, refused or
warned about per cloud."""

from __future__ import annotations

import pytest

from tests.unit.roles.preflight_checks import evaluate, named

# case -> (inputs, the options its one message may name, what it must say)
REFUSED = {
    "threshold above 100 %": ({"guard_idle_threshold_percent": 150}, {"guard_idle_threshold_percent"},
                              "got 150"),
    "negative node cap": ({"guard_node_cap": -5}, {"guard_node_cap"}, "got -5"),
    "price not a number": ({"guard_price_per_hour": "cheap"}, {"guard_price_per_hour"}, "got cheap"),
    "poll of zero seconds": ({"guard_poll_seconds": 0}, {"guard_poll_seconds"}, "got 0"),
    # A one-minute window read every 30 s holds two polls; every 60 s, one.
    "idle window of one poll": ({"guard_idle_window_minutes": 1, "guard_poll_seconds": 30},
                                {"guard_idle_window_minutes", "guard_poll_seconds"},
                                "the window must hold at least two polls"),
    "negative grace": ({"guard_idle_grace_minutes": -1}, {"guard_idle_grace_minutes"}, "got -1"),
    "alarm ratio above 1": ({"guard_budget_alarm_ratio": 1.5}, {"guard_budget_alarm_ratio"}, "got 1.5"),
    "relative marker path": ({"guard_marker_path": "event.json"}, {"guard_marker_path"}, "got 'event.json'"),
    "relative hook program": ({"guard_checkpoint_hook": ["save.sh"]}, {"guard_checkpoint_hook"}, "save.sh"),
    # The case: AWS gives 2 minutes; a 180 s margin leaves nothing.
    "margin past AWS's notice": (
        {"guard_spot_enabled": True, "guard_cloud": "aws", "guard_hook_margin_seconds": 180, "guard_checkpoint_seconds": 600},
        {"guard_hook_margin_seconds", "guard_poll_seconds", "guard_checkpoint_seconds"},
        "a spot notice on AWS comes 120 s before the reclaim: after a poll of guard_poll_seconds (5 s) the "
        "checkpoint hook would get -65 s, no time at all. Set guard_hook_margin_seconds below 115, for example 10."),
    # Tencent's window is 2 minutes too; the poll's 5 s and 115 s of margin
    # use all of it.
    "margin that uses Tencent's whole notice": (
        {"guard_spot_enabled": True, "guard_cloud": "tencent", "guard_hook_margin_seconds": 115},
        {"guard_hook_margin_seconds", "guard_poll_seconds", "guard_checkpoint_seconds"},
        "a spot notice on Tencent Cloud comes 120 s before the reclaim"),
    "poll that outlasts Alibaba's notice": (
        {"guard_spot_enabled": True, "guard_cloud": "aliyun", "guard_poll_seconds": 300},
        {"guard_hook_margin_seconds", "guard_poll_seconds", "guard_checkpoint_seconds"},
        "a spot notice on Alibaba Cloud comes 300 s before the reclaim: after a poll of guard_poll_seconds (300 s) "
        "the checkpoint hook would get -10 s, no time at all. Poll more often and keep back less, for example "
        "guard_poll_seconds 5 and guard_hook_margin_seconds 10."),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_one_wrong_option_one_message_naming_only_it_with_an_example(case):
    inputs, allowed, says = REFUSED[case]
    refused, _warned = evaluate("guard", inputs)
    assert len(refused) == 1, refused
    (message,) = refused
    assert says in message, message
    assert named("guard", message) <= allowed and named("guard", message) & allowed, (named("guard", message), message)
    assert "for example" in message, message
    assert "(got )" not in message and "_Ansible" not in message, message


def test_the_defaults_pass_without_a_warning():
    assert evaluate("guard", {}) == ([], [])


@pytest.mark.parametrize("cloud, margin, warned", [
    # AWS: 120 s - 5 s poll - 60 s margin = 55 s, below the 60 s minimum.
    ("aws", 60, True), ("aws", 55, False), ("aws", 10, False),
    # Alibaba's notice is about 5 minutes: 300 - 5 - 200 = 95 s.
    ("aliyun", 200, False), ("aliyun", 240, True),
    # Huawei gives no notice inside the instance: nothing to fit.
    ("huawei", 600, False),
])
def test_a_hook_that_gets_little_of_the_notice_is_warned_about(cloud, margin, warned):
    refused, warnings = evaluate("guard", {"guard_spot_enabled": True, "guard_cloud": cloud, "guard_hook_margin_seconds": margin})
    assert refused == []
    assert bool(warnings) == warned, warnings
    if warned:
        (message,) = warnings
        assert "less than 60 s" in message and "for example guard_hook_margin_seconds 10" in message, message


def test_off_spot_a_long_margin_is_the_idle_and_budget_deadlines_business():
    # guard_checkpoint_seconds is their deadline; no spot window applies.
    assert evaluate("guard", {"guard_spot_enabled": False, "guard_cloud": "aws", "guard_hook_margin_seconds": 180}) == ([], [])
