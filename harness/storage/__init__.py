"""Storage: the results database, a Django app of its own.

The models (objective → version → cell → metrics and curves; submissions, uploads, the
table cache), the functions that write and read them (:mod:`harness.storage.store`), the
migrations with the database triggers that keep the per-variant tallies, and the embedded
default (:mod:`harness.storage.settings`: SQLite under ``$HARNESS_HOME``). It stands on the
engine (a suite's declarations say what may be stored) and never imports the web app; the
client (:mod:`harness.api`, :mod:`harness.cli`) and the web app stand on it.
"""
