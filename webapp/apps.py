from django.apps import AppConfig


class WebappConfig(AppConfig):
    name = "webapp"
    verbose_name = "Objective Harness"

    def ready(self) -> None:
        from webapp import rendered, storage

        storage.cells_landed.connect(rendered.on_landing, dispatch_uid="rendered.on_landing")
