from django.apps import AppConfig


class BeliefsConfig(AppConfig):
    name = "beliefs"
    verbose_name = "Beliefs (the world model)"

    def ready(self) -> None:
        from beliefs import services
        from beliefs.schemas import BeliefChange
        from operator_site import proposals
        from operator_site.notifications import register_revert_handler

        # A high-stakes notice's one-tap link undoes the version it reports.
        register_revert_handler(services.SCOPE, services.WorldModelRevertHandler())
        # An agent may propose a world-model change for the person to accept.
        proposals.register(
            proposals.kind_for(
                action_type="world_model_change",
                tool="operator_update_world_model",
                reverter=services.REVERTER,
                schema=BeliefChange,
                apply=services.update_world_model,
                max_changes=services.MAX_CHANGES,
            )
        )
