from django.contrib import admin
from django.urls import path

from operator_site.cross_domain.api import api
from operator_site.metrics import metrics_view
from operator_site.views import revert_link

admin.site.site_header = "The operator"
admin.site.site_title = "The operator"
admin.site.index_title = "Review, approve, revert"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("metrics", metrics_view, name="metrics"),
    path("revert/<str:token>/", revert_link, name="revert-link"),
]
