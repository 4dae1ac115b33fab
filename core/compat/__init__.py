"""Compatibility layers for plugins written for upstream Ianvs and KubeEdge Sedna."""
