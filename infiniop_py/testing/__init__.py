"""Shared testing machinery: case tables, data layout with poison, comparison, timing."""
