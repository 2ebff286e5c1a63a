"""Event logs and the status snapshot."""
