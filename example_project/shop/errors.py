"""Errors the example shop's jobs raise, classified by the "emails" policy."""


class InvalidAddress(Exception):
    """The recipient address cannot be delivered to; retrying will not fix it."""
