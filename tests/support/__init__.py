"""Test helpers shared by several test packages (fake servers, fixtures builders)."""
