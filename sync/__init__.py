"""Fetching upstream facts: sources (HTTP, mirror directory, pip download) and the sync pipeline."""
