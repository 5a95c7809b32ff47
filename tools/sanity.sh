#!/usr/bin/env bash
# ansible-test sanity needs the collection at ansible_collections/NS/NAME.
# Build that tree from the files git knows (tracked, plus untracked files that
# are not ignored), without the self-link under collections/, and run every
# sanity test there with an empty ignore file.
set -euo pipefail
cd "$(dirname "$0")/.."

root=$PWD
tree=$root/.cache/sanity/ansible_collections/gpufleet/cloud
rm -rf "$root/.cache/sanity"
mkdir -p "$tree"
git ls-files -z --cached --others --exclude-standard |
    grep -zv '^collections/' |
    xargs -0 -I{} cp --parents -P {} "$tree"/
# ansible-test only uses git to list files; give it a repository of its own.
(cd "$tree" && git init -q && git add -A && git -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity)

cd "$tree"
export ANSIBLE_COLLECTIONS_PATH=$root/.cache/sanity:$root/.collections
# --venv: each test's own pinned tools in ansible-test's managed virtual
# environments, kept apart from the project's constraints.
exec ansible-test sanity --venv --python "$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')" --color no "$@"
