"""gemmini package."""
