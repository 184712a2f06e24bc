from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "harness.storage"
    # The label the tables (webapp_cell, …) and the migration history were created under,
    # kept so that every existing database opens as it is.
    label = "webapp"
    verbose_name = "Objective Harness results"
    default_auto_field = "django.db.models.BigAutoField"
