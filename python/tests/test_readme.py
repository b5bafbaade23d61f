"""python/README.md's tutorial, run: its ```sh and ```python blocks in order
from the repository's root, the Python ones in one namespace."""

import re
import subprocess

from conftest import BUILD, REPO


def blocks():
    text = (REPO / "python" / "README.md").read_text()
    tutorial = text[text.index("## Tutorial"):text.index("## API")]
    return re.findall(r"```(python|sh)\n(.*?)```", tutorial, re.S)


def test_tutorial(monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    found = blocks()
    assert sum(1 for lang, _ in found if lang == "python") >= 8
    ns = {"__name__": "tutorial"}
    for lang, code in found:
        if lang == "sh":
            # build/ravel is the build under test (BUILD may be build-asan)
            code = code.replace("build/ravel ", str(BUILD / "ravel") + " ")
            subprocess.run(["sh", "-ec", code], check=True)
        else:
            exec(compile(code, "README.md", "exec"), ns)
    out = capsys.readouterr().out
    assert "bad.rv 3" in out and "Ragged(float32[b < 3, l < *], 7 values)" in out


def test_package_docstring():
    import doctest
    import ravel
    result = doctest.testmod(ravel)
    assert result.attempted >= 3 and result.failed == 0
