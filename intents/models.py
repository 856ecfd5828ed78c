"""The intents app's tables. For now: directives, the person's short-lived voice instructions
(`quiet`, `topic_mute`, `focus`) that shape which notifications reach them and when."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone

from operator_site.models import Principal


class DirectiveQuerySet(models.QuerySet):
    def active(self, now=None) -> DirectiveQuerySet:
        """Not cleared and not yet expired: an expired directive is never in force, swept or not."""
        return self.filter(cleared_at__isnull=True, expires_at__gt=now or timezone.now())


class Directive(models.Model):
    class Kind(models.TextChoices):
        QUIET = "quiet", "quiet (hold everything but safety notices)"
        TOPIC_MUTE = "topic_mute", "mute a topic"
        FOCUS = "focus", "focus on a topic (hold everything off-topic)"

    class ClearReason(models.TextChoices):
        CLEARED = "cleared", "cleared"
        SUPERSEDED = "superseded", "superseded by a newer directive of the same kind and topic"

    TOPIC_KINDS = frozenset({"topic_mute", "focus"})

    kind = models.CharField(max_length=16, choices=Kind.choices)
    topic = models.CharField(max_length=100, blank=True, default="")
    reason = models.CharField(max_length=500, blank=True, default="")
    set_by = models.ForeignKey(Principal, on_delete=models.PROTECT, related_name="+")
    actor = models.CharField(max_length=64, help_text="The acting principal (never the caller's claim).")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    cleared_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.ForeignKey(
        Principal, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    clear_reason = models.CharField(max_length=16, choices=ClearReason.choices, blank=True, default="")

    objects = DirectiveQuerySet.as_manager()

    class Meta:
        ordering = ["expires_at", "id"]
        indexes = [
            models.Index(
                fields=["expires_at"], condition=Q(cleared_at__isnull=True), name="directive_open_by_expiry"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=models.F("created_at")), name="directive_expires_after_set"
            ),
            models.CheckConstraint(
                condition=Q(kind="quiet", topic="") | (Q(kind__in=["topic_mute", "focus"]) & ~Q(topic="")),
                name="directive_topic_iff_topic_kind",
            ),
        ]

    def __str__(self) -> str:
        topic = f" {self.topic!r}" if self.topic else ""
        return f"{self.kind}{topic} until {self.expires_at:%Y-%m-%d %H:%M}"
