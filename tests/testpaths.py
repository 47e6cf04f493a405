"""Where the suite's files are, for test modules in any sub-folder."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
MODELS = TESTS / "models"
