"""Rendering of rank files as plain-text and Markdown tables."""
