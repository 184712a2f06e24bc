from django.apps import AppConfig


class WebappConfig(AppConfig):
    name = "webapp"
    label = "web"  # "webapp" is the storage app's label (harness/storage/apps.py)
    verbose_name = "Objective Harness"

    def ready(self) -> None:
        from harness.storage import store
        from webapp import rendered

        store.cells_landed.connect(rendered.on_landing, dispatch_uid="rendered.on_landing")
