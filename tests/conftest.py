"""Shared fixtures. Tests never mock the database: DATABASE_URL points at a real one."""
