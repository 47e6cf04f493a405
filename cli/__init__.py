"""The Typer command line. Parses arguments, calls the library, renders; no logic of its own."""
