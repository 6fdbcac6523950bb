"""The admin says "Circuit breakers", as the docs and commands do: names only, no SQL (issue 36)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0033_run_after"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="circuit",
            options={"verbose_name": "circuit breaker", "verbose_name_plural": "circuit breakers"},
        ),
    ]
