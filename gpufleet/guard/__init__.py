"""`gpufleet guard`: the fleet view of the guard daemon (docs/guard.md)."""
