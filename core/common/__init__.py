"""Shared pieces: errors with hints, logging, the plugin registry, plugin loading and typed YAML reading."""
