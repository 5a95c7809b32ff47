#!/usr/bin/env bash
# Run every Molecule scenario (or the ones named), then check what Molecule
# itself does not: the check-mode pass on the converged node must report zero
# changes. Logs go to .cache/molecule-logs/<scenario>.log.
set -euo pipefail
cd "$(dirname "$0")/.."

scenarios=("$@")
if ((${#scenarios[@]} == 0)); then
    for f in extensions/molecule/*/molecule.yml; do
        s=$(basename "$(dirname "$f")")
        [[ $s == gpu ]] && continue # hardware scenarios run only where a GPU is
        scenarios+=("$s")
    done
fi

if ((${#scenarios[@]} == 0)); then
    echo "molecule-all: no scenario found under extensions/molecule" >&2
    exit 1
fi

mkdir -p .cache/molecule-logs
export COLUMNS=200 # keep PLAY RECAP lines unwrapped for the recap check
rc=0
for s in "${scenarios[@]}"; do
    log=.cache/molecule-logs/$s.log
    start=$(date +%s)
    if molecule test -s "$s" >"$log" 2>&1 && python3 tools/molecule_recap.py "$log"; then
        echo "molecule $s: passed in $(($(date +%s) - start))s"
    else
        echo "molecule $s: FAILED in $(($(date +%s) - start))s; last lines of $log:"
        tail -n 60 "$log"
        rc=1
    fi
done
exit $rc
