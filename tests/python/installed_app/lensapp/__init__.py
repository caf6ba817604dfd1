"""lensapp: an application the site tests install with pip (tests/e2e/test_installed_apps.py)."""
