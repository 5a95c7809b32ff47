#!/bin/sh
# Build a signed flat apt repository, laid out like NVIDIA's libnvidia-container
# repository (ROOT/ARCH/{InRelease,Packages,*.deb} and ROOT/gpgkey), holding a
# stand-in nvidia-container-toolkit package. NVIDIA's repository cannot be
# reached from the test machines; this lets the docker scenario run the
# role's real repository, key, apt and runtime steps against a mirror.
#
# The stand-in's nvidia-container-runtime records that dockerd chose it and
# hands the container to runc. It cannot give a container a GPU: that is what
# the gpu-marked tests check on machines with the real toolkit.
set -eu
root=$1
arch=$(dpkg --print-architecture)
version=1.17.8-1~gpufleet.test
work=$(mktemp -d)
export GNUPGHOME="$work/gnupg"
mkdir -m 0700 "$GNUPGHOME"

mkdir -p "$work/pkg/DEBIAN" "$work/pkg/usr/bin" "$root/$arch"
cat >"$work/pkg/DEBIAN/control" <<CONTROL
Package: nvidia-container-toolkit
Version: $version
Architecture: $arch
Maintainer: gpufleet tests <tests@gpufleet.invalid>
Depends: runc
Description: gpufleet test stand-in for the NVIDIA container toolkit
 Its runtime records each call and runs the container with runc.
CONTROL
cat >"$work/pkg/usr/bin/nvidia-container-runtime" <<'RUNTIME'
#!/bin/sh
echo "$*" >>/run/gpufleet-test-nvidia-runtime.log
exec runc "$@"
RUNTIME
chmod 0755 "$work/pkg/usr/bin/nvidia-container-runtime"
deb=nvidia-container-toolkit_${version}_$arch.deb
dpkg-deb --root-owner-group --build "$work/pkg" "$root/$arch/$deb" >/dev/null

cd "$root/$arch"
{
    dpkg-deb --field "$deb"
    echo "Filename: ./$deb"
    echo "Size: $(stat -c %s "$deb")"
    echo "SHA256: $(sha256sum "$deb" | cut -d' ' -f1)"
    echo
} >Packages
{
    echo "Origin: gpufleet test mirror"
    echo "Date: $(date -Ru)"
    echo "Architectures: $arch"
    echo "SHA256:"
    echo " $(sha256sum Packages | cut -d' ' -f1) $(stat -c %s Packages) Packages"
} >Release

gpg --batch --quiet --passphrase '' --quick-gen-key 'gpufleet test mirror <mirror@gpufleet.invalid>' ed25519 sign never
gpg --batch --quiet --yes --clearsign --output InRelease Release
gpg --batch --quiet --armor --export >"$root/gpgkey"
gpgconf --kill gpg-agent
rm -rf "$work"
