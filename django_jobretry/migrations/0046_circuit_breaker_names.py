"""The admin says "Circuit breakers", as the docs and commands do: names only, no SQL (issue 36)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0032_rows_python_can_use_validate"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="circuit",
            options={"verbose_name": "circuit breaker", "verbose_name_plural": "circuit breakers"},
        ),
    ]
