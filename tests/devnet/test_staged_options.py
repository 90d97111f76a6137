"""A staged devnet's options are refused before anything starts (`protocol/devnet/staged.py`), and
each cheating stage a devnet takes is the one its name says."""

from __future__ import annotations

import pytest

from miner.stage_cheat import ForkingStage, LazyStage
from protocol.core.errors import ConfigError
from protocol.devnet.network import DevnetOptions, parse_cheaters
from protocol.devnet.staged import check_staged, stage_cheat_of


def test_the_cheating_stages_are_named_and_taken_only_with_stages():
    assert isinstance(stage_cheat_of("stage-lazy"), LazyStage) and isinstance(stage_cheat_of("stage-fork"), ForkingStage)
    assert stage_cheat_of("lazy") is None  # a whole-model miner's cheat
    cheaters = parse_cheaters("stage-fork")
    check_staged(DevnetOptions(stages=2, pipelines=2, cheaters=cheaters))
    with pytest.raises(ConfigError, match="stage-fork take a stage seat: give --stages"):
        check_staged(DevnetOptions(cheaters=cheaters))
    with pytest.raises(ConfigError, match="cheaters are stage-lazy, stage-fork only, not lazy"):
        check_staged(DevnetOptions(stages=2, pipelines=2, cheaters=parse_cheaters("lazy")))
    with pytest.raises(ConfigError, match="needs an honest stage miner"):
        check_staged(DevnetOptions(stages=2, pipelines=1, cheaters=parse_cheaters("stage-lazy,stage-fork")))
    with pytest.raises(ConfigError, match="unknown cheater kind 'stage-slow'"):
        parse_cheaters("stage-slow")


def test_a_forking_stage_changes_one_bit_of_each_tensor_from_its_step_on():
    fork, computed = ForkingStage(from_step=2), bytes(range(16))
    assert fork.sends(1, computed) == computed
    for step in (2, 3):
        sent = fork.sends(step, computed)
        assert len(sent) == len(computed) and sent != computed and sent[1:] == computed[1:]
