from django.apps import AppConfig


class GoalsConfig(AppConfig):
    name = "goals"
    verbose_name = "Goals (the goal model, the board, the decision log)"

    def ready(self) -> None:
        from goals import goal_model
        from goals.schemas import GoalModelChangeItem
        from operator_site import proposals
        from operator_site.notifications import register_revert_handler

        # Every goal-model notice's one-tap link undoes the version it reports.
        register_revert_handler(goal_model.SCOPE, goal_model.GoalModelRevertHandler())
        # An agent may propose a goal-model change for the person to accept.
        proposals.register(
            proposals.kind_for(
                action_type="goal_model_change",
                tool="operator_reconcile_goal_model",
                reverter=goal_model.REVERTER,
                schema=GoalModelChangeItem,
                apply=goal_model.reconcile_goal_model,
                max_changes=goal_model.MAX_CHANGES,
            )
        )
