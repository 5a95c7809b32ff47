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
git -C "$tree" init -q
git -C "$tree" add -A
git -C "$tree" -c user.name=sanity -c user.email=sanity@localhost commit -qm sanity

# ansible-test fetches a pip bootstrap script from a host we cannot reach;
# give it our stand-in under the cache name it looks for.
pip_version=$(python3 - <<'PY'
import pathlib, re, ansible_test
src = (pathlib.Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
print(re.search(r"pip='([0-9.]+)'", src).group(1))
PY
)
cache=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
mkdir -p "$(dirname "$cache")"
cp tools/ansible-test-get-pip.py "$cache"

export ANSIBLE_COLLECTIONS_PATH=$root/.cache/sanity:$root/.collections
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
cd "$tree"
# --venv: each test's own pinned tools in ansible-test's managed virtual
# environments, kept apart from the project's constraints.
exec ansible-test sanity --venv --python "$pyver" --color no "$@"
