import math

from kernelseek_suite import scenarios as sc


def test_grid_has_182_unique_ids():
    g = sc.grid("sm90")
    assert len(g) == 182
    assert len({s.id for s in g}) == 182
    assert sum(s.causal for s in g) == 91


def test_grid_shapes_follow_the_spec():
    for s in sc.grid():
        assert s.seqlen_q == s.seqlen_k
        assert s.batch * s.seqlen_q == 32768
        assert s.heads_q % s.heads_kv == 0
        assert math.isclose(s.softmax_scale, 1 / math.sqrt(s.d_qk))
    ids = {s.id for s in sc.grid()}
    assert "d128-h16kv4-s4096-causal" in ids
    assert "d192v128-h16kv16-s512" in ids


def test_flops_convention():
    s = sc.by_id()["d128-h16kv16-s4096"]
    assert s.flops == 2 * 8 * 16 * 4096 * 4096 * 256
    c = sc.by_id()["d128-h16kv16-s4096-causal"]
    assert c.flops == s.flops / 2
    m = sc.by_id()["d192v128-h16kv16-s1024"]
    assert m.flops == 2 * 32 * 16 * 1024 * 1024 * (192 + 128)


def test_extended_set_covers_the_cases():
    ext = sc.extended()
    assert all(s.extended for s in ext)
    assert len({s.id for s in ext}) == len(ext)
    lens = {s.seqlen_q for s in ext} | {s.seqlen_k for s in ext}
    assert {1, 17, 113, 1000, 3001} <= lens
    assert any(s.seqlen_q > s.seqlen_k and s.causal for s in ext)
    assert any(s.seqlen_q < s.seqlen_k and s.causal for s in ext)
    assert any(s.heads_q == 1 for s in ext)
    assert {s.head_config for s in ext if s.heads_q > 1} == {hc.name for hc in sc.HEAD_CONFIGS}


def test_select_filters_by_glob():
    g = sc.grid()
    assert len(sc.select(g, "d128-*")) == 4 * 14
    assert len(sc.select(g, "*-causal")) == 91
    assert sc.select(g, "nothing-*") == []


def test_extended_set_size_and_flops_when_lengths_differ():
    ext = sc.extended()
    assert len(ext) == 13 * 2 * len(sc.EXTENDED_SHAPES) + 5 * 2 * len(sc.ONE_HEAD_SHAPES)
    s = sc.by_id()["ext-d128-h16kv4-b3-q113-k1000-causal"]
    assert (s.batch, s.seqlen_q, s.seqlen_k, s.heads_q, s.heads_kv, s.causal) == (3, 113, 1000, 16, 4, True)
    assert s.flops == 2 * 3 * 16 * 113 * 500 * 256


def test_by_id_holds_the_grid_and_the_extended_set_and_select_takes_several_patterns():
    ids = sc.by_id()
    assert len(ids) == 182 + len(sc.extended())
    picked = sc.select(sc.grid() + sc.extended(), "d96-*, ext-d96-h16kv16-b3-q17-k17")
    assert len(picked) == 14 + 1
