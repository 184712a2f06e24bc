"""The site's routes plus one view that fails: what an unhandled error looks like."""

from django.urls import path

from webapp.urls import handler500  # noqa: F401 - the 500 handler
from webapp.urls import urlpatterns as site


def boom(request):
    raise RuntimeError("the database cluster speaks SQL_ASCII")


urlpatterns = [*site, path("boom/", boom)]
