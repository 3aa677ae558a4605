from django.contrib import admin
from django.urls import include, path
from orders import views

urlpatterns = [
    path("admin/", admin.site.urls),
    # The console, for staff users: Django's login guards it, and its audit log names them.
    path("lowkiq/", include("lowkiq.contrib.django.urls")),
    path("orders/<str:order_id>/sync", views.sync_order, name="sync-order"),
]
