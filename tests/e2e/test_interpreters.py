"""The interpreters the Python tests run under (interpreters.py): every one CI requires
(MEMLENS_REQUIRE_PYTHONS) is built and has its hooks, so that a missing one fails the run instead
of leaving its tests out."""
import pytest

from conftest import BUILD
from interpreters import CACHE, REQUIRED, TESTS_PYTHON, describe, finished_builds


def test_every_required_interpreter_is_built_with_its_hooks():
    if not REQUIRED:
        pytest.skip("MEMLENS_REQUIRE_PYTHONS is not set (CI sets it): the Python tests run under "
                    "the interpreters there are")
    found = {describe(TESTS_PYTHON).tag: TESTS_PYTHON, **finished_builds()}
    missing = [tag for tag in REQUIRED if tag not in found]
    if missing:
        pytest.fail(f"MEMLENS_REQUIRE_PYTHONS names Python {' '.join(missing)}, not built under "
                    f"{CACHE}: tools/build-pythons {' '.join(missing)} builds them", pytrace=False)
    wrong = [f"{tag} is {describe(found[tag]).tag}" for tag in REQUIRED
             if describe(found[tag]).tag != tag]
    assert not wrong, f"builds under {CACHE} are not what their folder says: {wrong}"
    no_hooks = [tag for tag in REQUIRED
                if not (BUILD / "lib" / f"libmemlens_python{tag}.so").is_file()]
    if no_hooks:
        pytest.fail(f"no hooks for Python {' '.join(no_hooks)} in {BUILD / 'lib'}: configure with "
                    "-DMEMLENS_PYTHONS=<their executables> (tools/test does)", pytrace=False)
