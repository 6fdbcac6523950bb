"""The example site's own app: a shop whose background work uses jobs."""
