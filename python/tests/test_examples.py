"""Every example compiled and called from Python matches the interpreter."""

import pytest

from conftest import EXAMPLES, assert_close

import ravel


# Random arguments are no valid batch of structures for a recursion (its
# arrays come from a linearized batch; random ones break the numbering the
# compiled loops check), as in tests/suite_run.sh; tests/unit/
# test_recurse_lower.c runs those examples on linearized batches.
RANDOM_OK = [p for p in EXAMPLES
             if not any(l.startswith("recurse ") for l in p.read_text().splitlines())]


@pytest.mark.parametrize("path", RANDOM_OK, ids=[p.stem for p in RANDOM_OK])
def test_example_matches_interpreter(path):
    m = ravel.load(path)
    prog = m.compile()
    for seed in (1, 2):
        args = m.random_args(seed)
        got = prog(**args)
        want = m.run_interp(**args)
        assert set(got) == set(m.outputs) == set(want)
        for name, info in m.outputs.items():
            g, w = got[name], want[name]
            if isinstance(w, ravel.Ragged):
                assert isinstance(g, ravel.Ragged)
                g, w = g.values, w.values
            assert_close(g, w, info.dtype)
    assert prog.stats()["runs"] == 2
