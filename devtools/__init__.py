"""Developer tooling for this repository (not shipped in the wheel)."""
