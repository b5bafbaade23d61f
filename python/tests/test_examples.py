"""Every example compiled and called from Python matches the interpreter."""

import pytest

from conftest import EXAMPLES, assert_close

import ravel


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_matches_interpreter(path):
    m = ravel.load(path)
    prog = m.compile()
    for seed in (1, 2):
        args = m.random_args(seed)
        got = prog(args)  # a dict: a program may name a UF `out`
        want = m.run_interp(args)
        assert set(got) == set(m.outputs) == set(want)
        for name, info in m.outputs.items():
            g, w = got[name], want[name]
            if isinstance(w, ravel.Ragged):
                assert isinstance(g, ravel.Ragged)
                g, w = g.values, w.values
            assert_close(g, w, info.dtype)
    assert prog.stats()["runs"] == 2
