#!/usr/bin/env bash
# Run every Molecule scenario (or the ones named), then check what Molecule
# itself does not: the check-mode pass on the converged node must report zero
# changes. Logs go to .cache/molecule-logs/<scenario>.log.
#
# MOLECULE_JOBS scenarios run side by side (default 2): converges are bound
# by package unpacking, and two at a time keep both cores busy. Platform names
# carry the scenario name, so parallel scenarios never share a container.
set -euo pipefail
cd "$(dirname "$0")/.."

# Longest first, by the last fresh-clone CI's times (docs/test-times.md):
# with MOLECULE_JOBS side by side, the stage then never waits on a long
# scenario that happened to start last. Scenarios not listed here run
# after these.
LONGEST_FIRST=(docker monitoring security pull encrypted_storage nvidia_driver
    rdma node_health guard baseline dcgm nccl cloud_agent backup cuda)

list_only=0
if [[ ${1:-} == --list ]]; then # print the run order, run nothing
    list_only=1
    shift
fi
scenarios=("$@")
if ((${#scenarios[@]} == 0)); then
    found=()
    for f in extensions/molecule/*/molecule.yml; do
        s=$(basename "$(dirname "$f")")
        [[ $s == gpu ]] && continue # hardware scenarios run only where a GPU is
        found+=("$s")
    done
    for s in "${LONGEST_FIRST[@]}"; do
        [[ " ${found[*]} " == *" $s "* ]] && scenarios+=("$s")
    done
    for s in "${found[@]}"; do
        [[ " ${LONGEST_FIRST[*]} " == *" $s "* ]] || scenarios+=("$s")
    done
fi
if ((${#scenarios[@]} == 0)); then
    echo "molecule-all: no scenario found under extensions/molecule" >&2
    exit 1
fi

if ((list_only)); then
    printf '%s\n' "${scenarios[@]}"
    exit 0
fi

jobs=${MOLECULE_JOBS:-2}
mkdir -p .cache/molecule-logs
export COLUMNS=200 # keep PLAY RECAP lines unwrapped for the recap check

# MOLECULE_TIMES, where set, gets a line per scenario in the `timed` helper's
# form (tools/test_times.py writes them into docs/test-times.md).
times=${MOLECULE_TIMES:-/dev/null}

run_one() {
    local s=$1 log=.cache/molecule-logs/$1.log start rc=0
    start=$(date +%s)
    if molecule test -s "$s" >"$log" 2>&1 && python3 tools/molecule_recap.py "$log" >"$log.recap"; then
        echo "molecule $s: passed in $(($(date +%s) - start))s"
    else
        rc=1
        echo "molecule $s: FAILED in $(($(date +%s) - start))s; last lines of $log:"
        tail -n 60 "$log"
        cat "$log.recap" 2>/dev/null || true
    fi
    echo "$s $(($(date +%s) - start))s rc=$rc" >>"$times"
    return $rc
}

rc=0
running=0
for s in "${scenarios[@]}"; do
    if ((running >= jobs)); then
        wait -n || rc=1
        running=$((running - 1))
    fi
    run_one "$s" &
    running=$((running + 1))
done
while ((running > 0)); do
    wait -n || rc=1
    running=$((running - 1))
done
exit $rc
