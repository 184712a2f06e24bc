"""URL routes: pages, accounts and submissions, the JSON API and exports."""

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path, re_path
from django.views.generic.base import RedirectView

from webapp.views import accounts, pages, submit, uploads

handler500 = "webapp.views.errors.server_error"  # the request id on the page

urlpatterns = [
    path("", pages.home, name="home"),
    # browsers ask for /favicon.ico whatever the page says: the SVG icon, permanently
    path("favicon.ico", RedirectView.as_view(url=static("webapp/favicon.svg"),
                                             permanent=True)),
    path("suites/<str:name>/", pages.suite, name="suite"),
    path("objectives/<slug:slug>/", pages.objective, name="objective"),
    path("objectives/<slug:slug>/compare/", pages.compare, name="compare"),
    path("export/scores.csv", pages.export_scores, name="export-scores"),
    path("export/<str:suite>/<str:fmt>", pages.export, name="export"),
    path("submit/", submit.submit, name="submit"),
    path("runs/<int:pk>/", submit.run_status, name="run-status"),
    path("runs/<int:pk>/status.json", submit.run_status_json, name="run-status-json"),
    path("runs/<int:pk>/cancel/", submit.cancel_run, name="run-cancel"),
    path("runs/<int:pk>/requeue/", submit.requeue_run, name="run-requeue"),
    path("uploads/<int:pk>/", uploads.page, name="upload"),
    path("admin/", admin.site.urls),  # staff only (webapp/admin.py)
    path("ops/", accounts.ops, name="ops"),  # staff only (webapp/ops.py)
    path("accounts/", accounts.account, name="account"),
    path("accounts/signup/", accounts.signup, name="signup"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    # the token-authenticated API (before the read-only API's catch-all 404)
    re_path(r"^api/uploads/?$", uploads.create, name="api-uploads"),
    re_path(r"^api/uploads/(?P<pk>[0-9]+)/?$", uploads.detail, name="api-upload"),
    re_path(r"^api/row-keys/(?P<version_key>[^/]*)/?$", uploads.row_key, name="api-row-key"),
    re_path(r"^api/quota/?$", uploads.quota, name="api-quota"),
    path("api/", include("webapp.views.json_api")),
]
