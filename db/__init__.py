"""The catalog: SQLModel tables, engine factory, build, snapshot, queries and the resolver."""
