from django.db import models


class Execution(models.Model):
    """One run of a test job, written by the handler itself: counts survive any process."""

    key = models.CharField(max_length=100, db_index=True)
    attempt = models.PositiveIntegerField()
    pid = models.IntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key} attempt {self.attempt} (pid {self.pid})"
