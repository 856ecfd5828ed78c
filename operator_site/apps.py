from django.apps import AppConfig


class OperatorSiteConfig(AppConfig):
    name = "operator_site"
    verbose_name = "Operator"
