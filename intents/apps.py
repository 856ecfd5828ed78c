from django.apps import AppConfig


class IntentsConfig(AppConfig):
    name = "intents"

    def ready(self) -> None:
        # Directives hold ordinary notices; the kernel's deliverer asks the rule registered here.
        from intents.directives import hold_judge
        from operator_site import notifications

        notifications.register_hold_rule(hold_judge)
