"""Pure rendering: a stored plan's assignments and templates → deployment units (no IO)."""
