"""Leaderboard rows: ranking, CSV writing with atomic replace, and optional pictures."""
