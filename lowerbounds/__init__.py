"""lowerbounds package."""
