"""Helpers shared by the tests that drive real things (Molecule scenarios,
lab tests, emulators, benchmarks): one home each.

- ports: a free port on the loopback.
- waiting: wait on a condition with a deadline, never a fixed sleep.
- nodes: podman test nodes and ansible-playbook runs against them.
- prometheus: a real Prometheus server on a free port.
"""
