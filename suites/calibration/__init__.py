"""Calibration: training objectives and post-hoc calibrators, judged before and after
temperature scaling, in and out of distribution.

Built in steps; not registered in ``suites/__init__.py`` (so not listed, run or shown)
until it runs end to end. So far: its data (``data.py``); its metrics are the engine's
(``harness/calibration.py``) and its training baselines engine built-ins.
"""
