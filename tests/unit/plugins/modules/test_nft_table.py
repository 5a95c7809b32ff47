"""gpufleet.cloud.nft_table's decisions, with nft and unshare faked: a
kernel that holds one table's listing, and a file whose listing nft would
print once it is loaded. What nft itself lists is proven on real nodes (the
security Molecule scenario and the lab's drift test)."""

from __future__ import annotations

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.gpufleet.cloud.plugins.modules import nft_table

FILE_TABLE = "table inet gpufleet {\n\tchain input {\n\t\ttcp dport 22 accept\n\t}\n}\n"
EXTRA_RULE = FILE_TABLE.replace("22 accept\n", "22 accept\n\t\ttcp dport 4444 accept\n")


class FakeNode:
    def __init__(self, monkeypatch, *, kernel, file_table=FILE_TABLE, namespaces=True, load_rc=0,
                 load_result=None):
        self.kernel = kernel  # None: the table does not exist
        self.calls = []

        def run_command(_module, argv, *args, **kwargs):
            self.calls.append(argv)
            if argv[0] == "/usr/bin/unshare":
                if not namespaces:
                    return 1, "", "unshare: unshare failed: Operation not permitted\n"
                return 0, file_table, ""
            if argv[1:3] == ["list", "table"]:
                return (0, self.kernel, "") if self.kernel is not None else (1, "", "Error: No such file or directory\n")
            if argv[1] == "-f":
                if load_rc:
                    return load_rc, "", "Error: syntax error\n"
                self.kernel = file_table if load_result is None else load_result
                return 0, "", ""
            raise AssertionError(argv)

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                            lambda _m, name, *a, **k: {"nft": "/usr/sbin/nft", "unshare": "/usr/bin/unshare"}[name])

    def loads(self):
        return [c for c in self.calls if c[1:2] == ["-f"]]


def run(capsys, tmp_path, check=False):
    path = tmp_path / "gpufleet.nft"
    if not path.exists():
        path.write_text("table inet gpufleet\n")
    args = {"path": str(path), "name": "gpufleet", "_ansible_check_mode": check, "_ansible_diff": True}
    with patch_module_args(args), pytest.raises(SystemExit):
        nft_table.main()
    return json.loads(capsys.readouterr().out)


def test_the_same_table_changes_nothing(monkeypatch, capsys, tmp_path):
    node = FakeNode(monkeypatch, kernel=FILE_TABLE)
    result = run(capsys, tmp_path)
    assert result["changed"] is False and result["method"] == "namespace"
    assert node.loads() == []


@pytest.mark.parametrize("check", [True, False])
def test_a_rule_added_at_runtime_is_a_change_with_a_readable_diff(monkeypatch, capsys, tmp_path, check):
    node = FakeNode(monkeypatch, kernel=EXTRA_RULE)
    result = run(capsys, tmp_path, check=check)
    assert result["changed"] is True
    assert "4444" in result["diff"]["before"] and "4444" not in result["diff"]["after"]
    assert result["diff"]["before_header"] == "kernel: table inet gpufleet"
    # Check mode reports it and loads nothing; a run restores the file's table.
    assert len(node.loads()) == (0 if check else 1)
    assert node.kernel == (EXTRA_RULE if check else FILE_TABLE)


def test_an_absent_table_is_loaded(monkeypatch, capsys, tmp_path):
    node = FakeNode(monkeypatch, kernel=None)
    result = run(capsys, tmp_path)
    assert result["changed"] is True and result["live"] == "" and node.kernel == FILE_TABLE


def test_without_namespaces_check_mode_says_it_could_not_look(monkeypatch, capsys, tmp_path):
    node = FakeNode(monkeypatch, kernel=EXTRA_RULE, namespaces=False)
    result = run(capsys, tmp_path, check=True)
    # Unknown is never "in sync": a skip whose reason names check mode,
    # which the drift scan reports as could-not-verify.
    assert result["skipped"] is True and result["changed"] is False
    assert "check mode" in result["msg"] and "CAP_SYS_ADMIN" in result["msg"]
    assert node.loads() == []


@pytest.mark.parametrize(("kernel", "changed"), [(FILE_TABLE, False), (EXTRA_RULE, True), (None, True)])
def test_without_namespaces_a_run_reloads_and_compares(monkeypatch, capsys, tmp_path, kernel, changed):
    node = FakeNode(monkeypatch, kernel=kernel, namespaces=False)
    result = run(capsys, tmp_path)
    assert result["method"] == "reload" and result["changed"] is changed
    assert node.kernel == FILE_TABLE and len(node.loads()) == 1


def test_a_file_nft_refuses_fails_and_names_the_file(monkeypatch, capsys, tmp_path):
    def refuse(_module, argv, *args, **kwargs):
        if argv[0] == "/usr/bin/unshare":
            return 1, "", "/etc/nftables.d/gpufleet.nft:3:1-5: Error: syntax error\n"
        return 0, FILE_TABLE, ""

    FakeNode(monkeypatch, kernel=FILE_TABLE)
    monkeypatch.setattr(basic.AnsibleModule, "run_command", refuse)
    result = run(capsys, tmp_path)
    assert result["failed"] is True and "does not load" in result["msg"] and "nft -c -f" in result["msg"]


def test_a_failed_load_leaves_the_table_and_fails(monkeypatch, capsys, tmp_path):
    node = FakeNode(monkeypatch, kernel=EXTRA_RULE, load_rc=1)
    result = run(capsys, tmp_path)
    assert result["failed"] is True and "left as it was" in result["msg"] and node.kernel == EXTRA_RULE


def test_a_kernel_that_still_differs_after_the_load_fails(monkeypatch, capsys, tmp_path):
    FakeNode(monkeypatch, kernel=EXTRA_RULE, load_result=EXTRA_RULE)
    result = run(capsys, tmp_path)
    assert result["failed"] is True and "still differs" in result["msg"]


def test_a_missing_file_is_named(monkeypatch, capsys, tmp_path):
    FakeNode(monkeypatch, kernel=FILE_TABLE)
    args = {"path": str(tmp_path / "absent.nft"), "name": "gpufleet"}
    with patch_module_args(args), pytest.raises(SystemExit):
        nft_table.main()
    result = json.loads(capsys.readouterr().out)
    assert result["failed"] is True and "absent.nft does not exist" in result["msg"]
