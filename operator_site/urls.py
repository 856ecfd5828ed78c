from django.contrib import admin
from django.urls import path

from operator_site.api import api

admin.site.site_header = "The operator"
admin.site.site_title = "The operator"
admin.site.index_title = "Review, approve, revert"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/", api.urls),
]
