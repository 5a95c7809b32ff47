"""Stand-in for pip's get-pip.py, for ansible-test's managed environments.

ansible-test bootstraps pip in each virtual environment it makes with a
get-pip.py script that it downloads from a host our machines cannot reach.
This script does the same job with what is reachable: the standard library's
ensurepip puts a pip into the environment, and that pip then installs the
exact packages ansible-test asked for from PyPI. tools/sanity.sh copies it
into ansible-test's cache under the name ansible-test looks for.

Like get-pip.py, the arguments are `pip install` arguments, plus get-pip's own
--no-setuptools and --no-wheel, which only mean "do not add these".
"""

import ensurepip
import os
import subprocess
import sys

GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main():
    ensurepip.bootstrap(upgrade=True)
    args = [a for a in sys.argv[1:] if a not in GET_PIP_ONLY]
    # ansible-test passes a bare environment; name the system CA bundle so a
    # TLS-inspecting proxy in front of PyPI is trusted as it is machine-wide.
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    if os.path.exists(bundle):
        args = ["--cert", bundle] + args
    return subprocess.call([sys.executable, "-m", "pip", "install", "--upgrade"] + args)


if __name__ == "__main__":
    sys.exit(main())
