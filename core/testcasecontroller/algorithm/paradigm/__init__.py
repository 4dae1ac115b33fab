"""Paradigms: how a test case drives its modules."""
