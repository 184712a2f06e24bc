"""Django project and app: result storage now, leaderboard pages later."""
