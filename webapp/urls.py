"""URL routes. The leaderboard pages arrive with the web issue; storage works without them."""

urlpatterns: list = []
