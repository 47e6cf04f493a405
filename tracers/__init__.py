"""Tracers: turn a model file, a model factory or a runtime log into an OpList."""
