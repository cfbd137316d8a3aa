"""SPEC 3b: not built yet (issue 20)."""
