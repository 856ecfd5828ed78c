from django.apps import AppConfig


class CrossDomainConfig(AppConfig):
    """The top layer as an app of its own, so its commands and template tags are found."""

    name = "operator_site.cross_domain"
    label = "cross_domain"
    verbose_name = "Operator (cross-domain)"

    def ready(self) -> None:
        # The kernel's /metrics knows nothing of the domains: the scrape-time figures (the same
        # ones /api/health judges) are registered from here.
        from operator_site import metrics
        from operator_site.cross_domain.health import DatabaseCollector

        metrics.register_scrape_collector(DatabaseCollector())
