"""What a catalog file is: its schema version and the layout of what a build adds.

Apart from ``opcheck.db.schema`` so that opening a catalog (every command) does not import the
table classes, whose SQLModel and ORM set-up only a build needs.
"""

from __future__ import annotations

SCHEMA_VERSION = 4  # 2: the aclnn tables (CANN contract) and op_aclnn; 3: graph_converter.rebound
# 4: release.kernel_source_note
# What a built file holds beyond the rows (indexes, search tables). Part of the key of the
# catalog built in the user cache, so a new layout is rebuilt instead of reused.
LAYOUT_VERSION = 2
