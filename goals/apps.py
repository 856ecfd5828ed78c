from django.apps import AppConfig


class GoalsConfig(AppConfig):
    name = "goals"
    verbose_name = "Goals (the goal model, the board, the decision log)"

    def ready(self) -> None:
        from goals import goal_model
        from goals.goal_model.schemas import CHANGES

        # Every goal-model notice's one-tap link undoes the version it reports; an agent may propose
        # a goal-model change for the person to accept.
        goal_model.VERSIONED.register(
            action_type="goal_model_change",
            tool="operator_reconcile_goal_model",
            changes=CHANGES,
            apply=goal_model.reconcile_goal_model,
            identifiers=("title", "name"),  # a goal's or project's title, a priority's name
        )
