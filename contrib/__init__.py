"""Contributed knowledge: workarounds, troubleshooting signatures, verification of rewrites."""
