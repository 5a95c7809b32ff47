# Copyright: gpufleet developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Writing node_exporter textfile-collector files (and the guard's marker
file), shared by the nodes' own scripts.

_common's node_library step installs this file on the node as
gpufleet_textfile.py, so the scripts run from systemd without Ansible. It
uses the standard library only.
"""

from __future__ import annotations

import os
import tempfile


def escape(value: str) -> str:
    """A Prometheus label value: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def write_atomic(path: str, text: str, make_dirs: bool = False, mode: int = 0o644, sync: bool = False) -> None:
    """Write next to the target and rename over it: readers (node_exporter,
    a monitoring agent, a job) see the old file or the new one, never a
    partial one. The file gets ``mode`` (readable by all unless told
    otherwise). ``make_dirs`` creates its directory first; ``sync`` puts
    the content on disk before the rename, for a state file that must
    survive a power cut whole."""
    directory = os.path.dirname(os.path.abspath(path))
    if make_dirs:
        os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def gauge(name: str, help_text: str, samples) -> list:
    """One gauge in the text format: its HELP and TYPE lines, then one line
    per sample. ``samples`` are (labels, value) pairs: labels a dict, whose
    values are escaped here; value a number (a float as the shortest text
    that reads back as the same float, so a timestamp keeps its fraction),
    None (NaN: unknown, never 0), or text the caller formatted already."""
    return _family("gauge", name, help_text, samples)


def counter(name: str, help_text: str, samples) -> list:
    """One counter (a ``_total`` that only grows, reset only with what it
    counts), written as gauge() writes its samples."""
    return _family("counter", name, help_text, samples)


def _family(kind: str, name: str, help_text: str, samples) -> list:
    lines = ["# HELP %s %s" % (name, help_text.replace("\\", "\\\\").replace("\n", "\\n")),
             "# TYPE %s %s" % (name, kind)]
    for labels, value in samples:
        label_text = ",".join('%s="%s"' % (key, escape(str(text))) for key, text in labels.items())
        lines.append("%s{%s} %s" % (name, label_text, _sample(value)) if label_text else "%s %s" % (name, _sample(value)))
    return lines


def sample_text(value) -> str:
    """A sample value at full precision: a whole number as an integer (80
    GiB as 85899345920, where "%g" would round it to six digits), any other
    float as the shortest text that reads back as the same float."""
    if isinstance(value, int):
        return str(int(value))
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def _sample(value) -> str:
    if value is None:
        return "NaN"
    if isinstance(value, str):
        return value
    if isinstance(value, float):
        return repr(value)
    return str(int(value))
