"""Views: thin request handlers over webapp.leaderboard and webapp.storage."""
