#!/usr/bin/env bash
# galaxy-importer, the check Galaxy and Automation Hub run on an upload, on
# the tarball `ansible-galaxy collection build` makes (build_ignore applied,
# as for make ee-tarball): a role without a README, documentation
# ansible-doc cannot load or a bad galaxy.yml fails here, not at upload.
#
# galaxy-importer exits 0 after logging many problems (only an aborted
# import exits 1), so this fails on its exit status, on every line it logs as
# WARNING, ERROR or CRITICAL, on a traceback, and on a missing result file.
# Settings: tools/galaxy-importer.cfg. Needs the venv of `make lint-venv`.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
importer_python=${GALAXY_IMPORTER_PYTHON:-$root/.cache/lint-venv/bin/python}
# The build is the main venv's, as for make ee-tarball.
ansible_galaxy=${ANSIBLE_GALAXY:-$root/.venv/bin/ansible-galaxy}
out=$root/.cache/lint/galaxy-importer
rm -rf "$out" && mkdir -p "$out"

"$ansible_galaxy" collection build --force --output-path "$out" . >"$out/build.log" ||
    { cat "$out/build.log" >&2; echo "galaxy-importer: ansible-galaxy collection build failed" >&2; exit 1; }
tarballs=("$out"/*.tar.gz)
tarball=${tarballs[0]}

# It writes importer_result.json into its working directory. Our
# ansible.cfg stays out: the importer points ansible-doc at the unpacked
# tarball itself, and the checkout's settings (strategy plugin, paths) have no
# place in what Galaxy would see.
rc=0
(cd "$out" && env -u ANSIBLE_CONFIG GALAXY_IMPORTER_CONFIG="$root/tools/galaxy-importer.cfg" \
    PATH="$(dirname "$importer_python"):$PATH" \
    "$importer_python" -m galaxy_importer.main "$tarball") >"$out/importer.log" 2>&1 || rc=$?

problems=$(grep -E '^(WARNING|ERROR|CRITICAL):|^Traceback ' "$out/importer.log" || true)
if ((rc != 0)) || [[ -n $problems ]] || [[ ! -s $out/importer_result.json ]]; then
    cat "$out/importer.log" >&2
    echo >&2
    echo "galaxy-importer: $(basename "$tarball") would not import cleanly (exit $rc):" >&2
    if [[ -n $problems ]]; then
        printf '  %s\n' "${problems//$'\n'/$'\n'  }" >&2
        # Its messages seldom name the file; the step it was on does ("Loading role nccl").
        step=$(grep -B1 -m1 -E '^(WARNING|ERROR|CRITICAL):|^Traceback ' "$out/importer.log" | head -1)
        echo "  the first of them came after: $step" >&2
    fi
    [[ -s $out/importer_result.json ]] || echo "  no importer_result.json was written" >&2
    echo "  fix what the lines above name (the full log: ${out#"$root"/}/importer.log)" >&2
    exit 1
fi
echo "galaxy-importer: $(basename "$tarball") imports cleanly"
