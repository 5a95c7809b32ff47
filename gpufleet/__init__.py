"""gpufleet: discover, bootstrap and drift-check GPU fleets."""

__version__ = "0.1.0"
