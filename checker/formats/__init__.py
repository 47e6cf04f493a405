"""Output formats of opcheck's documents: one module per format, listed in a registry.

``REPORT_FORMATS`` are the formats of ``opcheck check`` (a ``Report``), ``ZOO_FORMATS`` those
of ``opcheck zoo`` (a ``ZooResult``). The CLI's ``--format`` choices, its validation and its
help text come from these registries. Adding a format is one module here defining
``render(doc, ctx) -> str`` and one ``Format`` line below. ``table`` is drawn with colours by
the CLI (``opcheck.cli.render``), the only layer with a console.

This module imports no renderer: the CLI reads it at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from opcheck.checker.formats.base import Format, Registry, RenderContext

if TYPE_CHECKING:
    from opcheck.checker.atlas import AtlasResult
    from opcheck.checker.check import Report
    from opcheck.checker.zoo import ZooResult

__all__ = ["ATLAS_FORMATS", "REPORT_FORMATS", "ZOO_FORMATS", "Format", "Registry", "RenderContext"]

REPORT_FORMATS: Registry[Report] = Registry("report", [
    Format("table", "verdict and problems as a terminal table", terminal=True),
    Format("json", "the report document (kind opcheck.report)", "report_json"),
    Format("markdown", "a migration report to hand over: the target, the model, its ops",
           "report_markdown", wants_environment=True),
    Format("sarif", "SARIF 2.1.0 for code-scanning dashboards", "report_sarif"),
    Format("csv", "one line per op, every op (spreadsheets)", "report_csv"),
    Format("junit", "JUnit XML, one test case per op, for CI test reports", "report_junit"),
    Format("github", "GitHub Actions annotations (::error file=…,line=…::) per problem op", "report_github"),
])  # fmt: skip

ZOO_FORMATS: Registry[ZooResult] = Registry("zoo", [
    Format("table", "releases × models as a terminal table", terminal=True),
    Format("markdown", "the coverage table and the newest release's problem ops", "zoo_markdown"),
    Format("csv", "one line per model and release", "zoo_csv"),
    Format("json", "the zoo document (kind opcheck.zoo)", "zoo_json"),
])  # fmt: skip

ATLAS_FORMATS: Registry[AtlasResult] = Registry("atlas", [
    Format("table", "one line per architecture as a terminal table", terminal=True),
    Format("json", "the atlas document (kind opcheck.atlas)", "atlas_json"),
    Format("csv", "one line per architecture and run of releases (atlas.tsv's columns)", "atlas_csv"),
    Format("markdown", "one line per architecture: newest verdict, problem ops", "atlas_markdown"),
])  # fmt: skip
