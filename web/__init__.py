"""The catalog served to a team: Datasette app, workers, page cache, pages."""
