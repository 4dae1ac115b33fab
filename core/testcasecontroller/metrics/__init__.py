"""Metrics: resolution by alias, the calling convention, and built-in metrics."""
