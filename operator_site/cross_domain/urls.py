from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from operator_site.cross_domain.api import api
from operator_site.metrics import metrics_view
from operator_site.views import revert_link

admin.site.site_header = "The operator"
admin.site.site_title = "The operator"
admin.site.index_title = "Review, approve, revert"

urlpatterns = [
    # A person who opens the bare address lands on the dashboard (the admin asks them to log in first).
    path("", RedirectView.as_view(pattern_name="admin:index", permanent=False), name="home"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("metrics", metrics_view, name="metrics"),
    path("revert/<str:token>/", revert_link, name="revert-link"),
]
