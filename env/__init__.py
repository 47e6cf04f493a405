"""The installed stack: probe what is here and assess it against the release matrix."""
