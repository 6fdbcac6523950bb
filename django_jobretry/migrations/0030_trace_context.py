"""The enqueuer's trace context on jobs and dead letters (services/tracing.py): nullable, nothing rewritten."""

from django.db import migrations

import django_jobretry.models.fields


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0029_unique_window_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="deadletter",
            name="trace_context",
            field=django_jobretry.models.fields.StoredJSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="job",
            name="trace_context",
            field=django_jobretry.models.fields.StoredJSONField(blank=True, null=True),
        ),
    ]
