"""Algorithm YAML, module grid and paradigms."""
