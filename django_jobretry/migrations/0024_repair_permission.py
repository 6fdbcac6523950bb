"""The permission to repair a dead letter's arguments before requeueing it (services/repairs.py)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("django_jobretry", "0023_argument_search_indexes"),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="deadletter",
            options={
                "permissions": [
                    ("requeue_deadletter", "Can requeue dead letters"),
                    ("discard_deadletter", "Can discard dead letters"),
                    ("repair_deadletter", "Can repair a dead letter's arguments and requeue it"),
                ],
                "verbose_name": "dead letter",
            },
        ),
    ]
