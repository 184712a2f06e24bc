"""The sandbox's tests (docs/sandbox.md), its hostile corpus (hostile/, split by attack family
into test_hostile_*.py: hostile_cases.py) and the corpora of its other attack tests."""
