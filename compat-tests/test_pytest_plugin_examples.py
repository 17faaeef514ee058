"""README's "Use Samsa in your tests" examples, run as a user's test files (pytester, plugin from its entry point)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
pytestmark = pytest.mark.timeout(240)


def _examples() -> list[str]:
    text = README.read_text()
    section = text[text.index("## Use Samsa in your tests"):]
    section = section[:section.index("\n## ", 3)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_has_one_example_per_client() -> None:
    blocks = _examples()
    assert len(blocks) == 3
    assert ["kafka" in b for b in blocks] == [True, True, True]


def test_readme_examples_pass(pytester: pytest.Pytester) -> None:
    for i, block in enumerate(_examples()):
        pytester.makepyfile(**{f"test_example_{i}": block})
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=3)
