from django.apps import AppConfig


class BeliefsConfig(AppConfig):
    name = "beliefs"
    verbose_name = "Beliefs (the world model)"

    def ready(self) -> None:
        from beliefs.services import SCOPE, WorldModelRevertHandler
        from operator_site.notifications import register_revert_handler

        # A high-stakes notice's one-tap link undoes the version it reports.
        register_revert_handler(SCOPE, WorldModelRevertHandler())
