from django.apps import AppConfig


class GoalsConfig(AppConfig):
    name = "goals"
    verbose_name = "Goals (the goal model, the board, the decision log)"

    def ready(self) -> None:
        from goals.goal_model import SCOPE, GoalModelRevertHandler
        from operator_site.notifications import register_revert_handler

        # Every goal-model notice's one-tap link undoes the version it reports.
        register_revert_handler(SCOPE, GoalModelRevertHandler())
