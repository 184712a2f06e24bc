"""Sign up, log in, log out (Django auth); log out is a POST with a CSRF token."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "a-long-Passphrase-42"


def signup(client: Client, username: str = "ada", next_url: str | None = None):
    data = {"username": username, "password1": PASSWORD, "password2": PASSWORD}
    if next_url is not None:
        data["next"] = next_url
    return client.post("/accounts/signup/", data)


def test_signup_creates_the_user_and_logs_them_in(client):
    assert client.get("/accounts/signup/").status_code == 200
    response = signup(client)
    assert response.status_code == 302 and response["Location"] == "/"
    user = User.objects.get(username="ada")
    assert user.check_password(PASSWORD)
    assert client.session["_auth_user_id"] == str(user.pk)
    assert client.get("/submit/").status_code == 200


def test_signup_errors_come_back_on_the_form(client):
    User.objects.create_user("ada", password=PASSWORD)
    response = signup(client)
    assert response.status_code == 200 and "already exists" in response.content.decode()
    response = client.post("/accounts/signup/", {"username": "bo", "password1": PASSWORD,
                                                 "password2": PASSWORD + "x"})
    assert response.status_code == 200 and not User.objects.filter(username="bo").exists()


@pytest.mark.parametrize("password, words", [
    ("x", "too short"), ("password123", "too common"), ("84736251907", "entirely numeric"),
])
def test_weak_passwords_are_refused_at_signup(client, password, words):
    response = client.post("/accounts/signup/", {"username": "bo", "password1": password,
                                                 "password2": password})
    assert response.status_code == 200 and not User.objects.filter(username="bo").exists()
    assert words in response.content.decode()


def test_signup_follows_a_local_next_and_ignores_another_site(client):
    assert signup(client, "ada", "/submit/")["Location"] == "/submit/"
    other = Client()
    assert signup(other, "bea", "https://evil.example/")["Location"] == "/"


def test_login_page_links_to_signup_with_next(client):
    html = client.get("/accounts/login/?next=/submit/").content.decode()
    assert 'name="username"' in html and 'name="password"' in html
    assert 'href="/accounts/signup/?next=/submit/"' in html.replace("%2F", "/")


def test_login_then_logout_by_post(client):
    User.objects.create_user("ada", password=PASSWORD)
    response = client.post("/accounts/login/", {"username": "ada", "password": PASSWORD,
                                                "next": "/submit/"})
    assert response.status_code == 302 and response["Location"] == "/submit/"
    assert client.get("/submit/").status_code == 200
    assert client.get("/accounts/logout/").status_code == 405  # never by a link
    assert client.post("/accounts/logout/").status_code == 302
    assert client.get("/submit/").status_code == 302


def test_wrong_password_is_refused(client):
    User.objects.create_user("ada", password=PASSWORD)
    response = client.post("/accounts/login/", {"username": "ada", "password": "nope"})
    assert response.status_code == 200 and "_auth_user_id" not in client.session


def test_auth_forms_require_the_csrf_token():
    strict = Client(enforce_csrf_checks=True)
    assert strict.post("/accounts/signup/", {"username": "ada", "password1": PASSWORD,
                                             "password2": PASSWORD}).status_code == 403
    assert strict.post("/accounts/login/", {"username": "ada",
                                            "password": PASSWORD}).status_code == 403
    assert not User.objects.exists()
