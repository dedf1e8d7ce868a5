"""cosa package."""
