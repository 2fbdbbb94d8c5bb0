"""Fixtures of the unit tests.

Unit tests need no server: what they share (settings, START, the hermetic environment that
every test gets) is in tests/conftest.py, and the few fixtures a single module needs (the
source tree of test_layout.py) stay in that module, next to the tests that use them. A fixture
two unit modules share belongs here.
"""
