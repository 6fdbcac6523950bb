"""Template tags of the admin pages (jobretry_admin)."""
