"""The console's URLs: ``path("lowkiq/", include("lowkiq.contrib.django.urls"))`` in the project's urls.py."""

from __future__ import annotations

from django.urls import re_path

from . import views

app_name = "lowkiq"
urlpatterns = [re_path(r"^(?P<path>.*)\Z", views.console, name="console")]
