"""What a data file may say: Pydantic models only, no I/O (layer 1)."""
