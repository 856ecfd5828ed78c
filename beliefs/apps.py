from django.apps import AppConfig


class BeliefsConfig(AppConfig):
    name = "beliefs"
    verbose_name = "Beliefs (the world model)"

    def ready(self) -> None:
        from beliefs import services
        from beliefs.schemas import CHANGES

        # A high-stakes notice's one-tap link undoes the version it reports; an agent may propose a
        # world-model change for the person to accept.
        services.VERSIONED.register(
            action_type="world_model_change",
            tool="operator_update_world_model",
            changes=CHANGES,
            apply=services.update_world_model,
        )
