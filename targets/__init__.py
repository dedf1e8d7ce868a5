"""targets package."""
