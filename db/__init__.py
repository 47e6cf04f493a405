"""The catalog's storage: table spec, records, engine, build, snapshot and the read API."""
