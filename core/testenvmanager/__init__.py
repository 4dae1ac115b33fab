"""Test environment manager: the testenv YAML, datasets and the sandbox that executes code."""
