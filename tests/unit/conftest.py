"""Fixtures of the unit tests.

Unit tests need no server: the fixtures they share (the hermetic environment every test gets)
are in tests/conftest.py, plain helpers (make_settings, START) in tests/helpers.py; the few
fixtures a single module needs (the source tree of test_layout.py) stay in that module, next
to the tests that use them. A fixture two unit modules share belongs here.
"""
