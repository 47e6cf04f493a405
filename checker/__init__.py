"""Deciding what the NPU does with an op list: resolver, checker, restrictions, queries, zoo, formats."""
