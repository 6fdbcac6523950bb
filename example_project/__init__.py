"""A small runnable Django site that uses django-jobretry (see `make demo`)."""
