"""Views: thin request handlers over webapp.leaderboard and harness.storage.store."""
