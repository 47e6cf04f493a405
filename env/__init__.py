"""The installed stack: probe what is here (``probe``) and assess it against the release
matrix (``assess``)."""
