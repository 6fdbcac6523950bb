from django.db import models


class Execution(models.Model):
    """One run of a test job, written by the handler itself: counts survive any process."""

    key = models.CharField(max_length=100, db_index=True)
    attempt = models.PositiveIntegerField()
    pid = models.IntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.key} attempt {self.attempt} (pid {self.pid})"


class LedgerRun(models.Model):
    """One run of a limited test job, timed by the database clock at its start and its end."""

    key = models.CharField(max_length=100, db_index=True)
    job_id = models.BigIntegerField()
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{self.key} job {self.job_id}"
