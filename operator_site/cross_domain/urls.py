from django.contrib import admin
from django.http import HttpRequest, HttpResponseRedirect
from django.urls import path, re_path, reverse
from django.views.generic import RedirectView

from operator_site.cross_domain.api import api
from operator_site.metrics import metrics_view
from operator_site.views import revert_link

admin.site.site_header = "The operator"
admin.site.site_title = "The operator"
admin.site.index_title = "Review, approve, revert"


def instruction_moved(request: HttpRequest, rest: str) -> HttpResponseRedirect:
    """The person's instructions moved from the beliefs app into the kernel, and their admin pages
    with them (/admin/beliefs/instruction/… → /admin/operator_site/instruction/…): a bookmarked page
    (the add page is where the person records their words) still leads there. Only the admin's own
    page shapes are matched, so nothing else can be redirected through it."""
    query = request.META.get("QUERY_STRING", "")
    target = reverse("admin:operator_site_instruction_changelist") + rest
    return HttpResponseRedirect(target + ("?" + query if query else ""))


urlpatterns = [
    # A person who opens the bare address lands on the dashboard (the admin asks them to log in first).
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False), name="home"),
    re_path(
        r"^admin/beliefs/instruction/(?P<rest>(?:add/|\d{1,19}/(?:change/|history/)?)?)$", instruction_moved
    ),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("metrics", metrics_view, name="metrics"),
    path("revert/<str:token>/", revert_link, name="revert-link"),
]
