"""Compositions from TOML, their validation errors, and the policy registry."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from blox_slurm.core import composition, registry
from blox_slurm.core.composition import CompositionError
from blox_slurm.core.registry import PolicyError
from blox_slurm.loading import build, load
from blox_slurm.policies.admission.accept_all import AcceptAll
from blox_slurm.policies.admission.load_based import LoadBased
from blox_slurm.policies.cluster.static import Static
from blox_slurm.policies.placement.consolidated import Consolidated
from blox_slurm.policies.placement.first_fit import FirstFit
from blox_slurm.policies.preemption.priority import PriorityPreemption
from blox_slurm.policies.scheduling.fifo import Fifo
from blox_slurm.policies.scheduling.tiresias import Tiresias


def write(tmp_path: Path, text: str, name: str = "comp.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def error(config: dict) -> str:
    with pytest.raises(CompositionError) as e:
        build(config)
    return str(e.value)


# --------------------------------------------------------------------------- loading

def test_toml_file_builds_each_extension_point_with_its_parameters(tmp_path) -> None:
    p = write(tmp_path, """
        name = "mine"
        [scheduling]
        policy = "tiresias"
        thresholds = [100, 1000]
        promote_knob = 2
        [placement]
        policy = "consolidated"
        spread_if_needed = true
        [admission]
        policy = "load_based"
        k = 1.3
        [simulation]
        round_duration = 60
    """)
    c = load(p)
    assert c.name == "mine"
    assert isinstance(c.scheduling, Tiresias)
    assert c.scheduling.thresholds == [100.0, 1000.0] and c.scheduling.promote_knob == 2.0
    assert isinstance(c.placement, Consolidated) and c.placement.spread_if_needed is True
    assert isinstance(c.admission, LoadBased) and c.admission.k == 1.3
    # defaults for the sections left out
    assert isinstance(c.preemption, PriorityPreemption) and c.preemption.spares_victims is True
    assert isinstance(c.cluster, Static)
    assert c.time_dependent is True
    assert c.config["placement"] == {"policy": "consolidated", "spread_if_needed": True}
    assert "simulation" not in c.config  # belongs to the simulator, ignored here


def test_name_defaults_to_the_file_stem_then_the_scheduling_policy(tmp_path) -> None:
    assert load(write(tmp_path, '[scheduling]\npolicy = "fifo"\n', "x-y.toml")).name == "x-y"
    assert build({"scheduling": "las"}).name == "las"


def test_shorthand_policy_names(tmp_path) -> None:
    c = load(write(tmp_path, 'scheduling = "fifo"\nplacement = "consolidated"\n'))
    assert isinstance(c.scheduling, Fifo) and isinstance(c.placement, Consolidated)
    assert c.placement.spread_if_needed is False
    assert c.time_dependent is False


def test_config_rebuilds_an_equivalent_composition() -> None:
    c = load("tiresias")
    again = build(c.config)
    assert again.name == c.name and again.config == c.config
    assert type(again.placement) is type(c.placement)
    assert again.scheduling.thresholds == c.scheduling.thresholds


@pytest.mark.parametrize("name", composition.bundled_names())
def test_every_bundled_composition_builds(name) -> None:
    c = load(name)
    path, data = composition.read(name)
    assert path.parent == composition.BUNDLED_DIR
    assert c.name == data.get("name", name)
    for kind in registry.KINDS:
        assert getattr(c, kind) is not None


def test_bundled_set_includes_blox_compat_and_main_policies() -> None:
    names = set(composition.bundled_names())
    assert {"fifo", "las", "srtf", "tiresias", "optimus", "las-load-based", "blox-fifo",
            "blox-las"} <= names


# --------------------------------------------------------------------------- errors

def test_unknown_policy_name_lists_the_valid_ones() -> None:
    msg = error({"scheduling": "fiffo"})
    assert "unknown scheduling policy 'fiffo'" in msg
    for valid in ("fifo", "las", "optimus", "srtf", "tiresias"):
        assert valid in msg
    msg = error({"scheduling": "fifo", "placement": {"policy": "best_fit"}})
    assert "unknown placement policy 'best_fit'" in msg
    assert "consolidated, first_fit, scattered" in msg


def test_unknown_parameter_names_section_key_and_valid_keys() -> None:
    msg = error({"scheduling": "fifo", "placement": {"policy": "consolidated", "spread": True}})
    assert msg.startswith("[placement] policy 'consolidated': invalid parameters")
    assert "unknown key 'spread'; valid keys: spread_if_needed" in msg
    msg = error({"scheduling": {"policy": "tiresias", "treshold": [1]}})
    assert "[scheduling]" in msg and "'treshold'" in msg
    assert "valid keys: thresholds, promote_knob" in msg


def test_parameter_of_a_policy_without_parameters_is_rejected() -> None:
    msg = error({"scheduling": "fifo", "admission": {"policy": "accept_all", "k": 1.2}})
    assert "[admission] policy 'accept_all'" in msg
    assert "unknown key 'k'; valid keys: (none)" in msg


@pytest.mark.parametrize(("section", "params", "key"), [
    ("scheduling", {"policy": "tiresias", "thresholds": "big"}, "thresholds"),
    ("scheduling", {"policy": "optimus", "max_gpus": "lots"}, "max_gpus"),
    ("placement", {"policy": "consolidated", "spread_if_needed": "maybe"}, "spread_if_needed"),
    ("admission", {"policy": "load_based", "k": [1]}, "k"),
    ("preemption", {"policy": "priority", "minimize": 3.5}, "minimize"),
])
def test_wrong_parameter_type_names_section_and_key(section, params, key) -> None:
    config = {"scheduling": "fifo", section: params}
    msg = error(config)
    assert msg.startswith(f"[{section}] policy '{params['policy']}': invalid parameters")
    assert f"  {key}: " in msg
    assert repr(params[key]) in msg  # the offending value is shown


def test_missing_scheduling_section() -> None:
    assert "missing [scheduling]" in error({"placement": "first_fit"})


def test_malformed_sections() -> None:
    assert "[placement] must be a table or a policy name" in error(
        {"scheduling": "fifo", "placement": 3})
    assert '[scheduling] needs policy = "<name>"' in error({"scheduling": {"policy": 7}})
    assert "[scheduling] needs policy" in error({"scheduling": {"thresholds": [1.0]}})


def test_missing_file_bundled_name_and_bad_toml(tmp_path) -> None:
    with pytest.raises(CompositionError, match="composition file not found"):
        load(tmp_path / "nope.toml")
    with pytest.raises(CompositionError, match="bundled: .*blox-fifo.*fifo"):
        load("no-such-composition")
    with pytest.raises(CompositionError, match="not valid TOML"):
        load(write(tmp_path, "[scheduling\npolicy = 'fifo'\n"))


# --------------------------------------------------------------------------- registry

POLICY_FILE = '''
from blox_slurm.core.abstractions import Schedule
from blox_slurm.core.registry import register
from pydantic import BaseModel, ConfigDict


@register("scheduling", "{name}")
class LongestFirst:
    """Test policy: biggest GPU request first."""

    time_dependent = False
    keyed = True

    class Params(BaseModel):
        model_config = ConfigDict(extra="forbid")
        reverse: bool = False

    def __init__(self, params=None):
        self.reverse = (params or self.Params()).reverse

    def order(self, snapshot, jobs):
        return Schedule(sorted(jobs, key=lambda j: (-j.num_gpus, j.id), reverse=self.reverse))
'''


def test_policy_path_file_registers_a_usable_policy(tmp_path) -> None:
    p = tmp_path / "my_policy.py"
    p.write_text(POLICY_FILE.format(name="test-longest-first"))
    with pytest.raises(CompositionError, match="unknown scheduling policy"):
        build({"scheduling": "test-longest-first"})
    registry.load_policy_file(p)
    registry.load_policy_file(p)  # loading the same file again is harmless
    c = build({"scheduling": {"policy": "test-longest-first", "reverse": True}})
    assert type(c.scheduling).__name__ == "LongestFirst" and c.scheduling.reverse is True
    spec = registry.get("scheduling", "test-longest-first")
    assert spec.summary == "Test policy: biggest GPU request first."
    assert "test-longest-first" in [s.name for s in registry.available("scheduling")]
    with pytest.raises(CompositionError, match="unknown key 'revers'; valid keys: reverse"):
        build({"scheduling": {"policy": "test-longest-first", "revers": True}})


def test_policy_file_errors(tmp_path) -> None:
    with pytest.raises(PolicyError, match="policy file not found"):
        registry.load_policy_file(tmp_path / "missing.py")
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(PolicyError, match="failed to import: boom"):
        registry.load_policy_file(bad)
    with pytest.raises(PolicyError, match="unknown policy kind 'routing'"):
        registry.register("routing", "x")
    undeclared = tmp_path / "undeclared.py"  # capabilities are declared, never guessed
    undeclared.write_text(POLICY_FILE.format(name="test-undeclared")
                          .replace("    keyed = True\n", ""))
    with pytest.raises(PolicyError, match="does not declare keyed: subclass "
                                          "blox_slurm.core.abstractions.SchedulingBase"):
        registry.load_policy_file(undeclared)


def test_policy_file_cannot_silently_replace_a_builtin(tmp_path) -> None:
    # A user class that happens to share the built-in's class name must not take over "fifo".
    p = tmp_path / "clash.py"
    p.write_text(POLICY_FILE.format(name="fifo").replace("class LongestFirst", "class Fifo"))
    with pytest.raises(PolicyError, match="already registered"):
        registry.load_policy_file(p)
    assert registry.get("scheduling", "fifo").factory is Fifo


def test_every_builtin_policy_lives_where_a_lookup_finds_it_alone() -> None:
    """``get`` imports ``blox_slurm/policies/<kind>/<name>.py`` only; a built-in registered
    anywhere else would still be found, by loading everything, and the saving would be gone
    without a failure to say so."""
    builtins = [s for s in registry.available() if s.factory.__module__.startswith(
        "blox_slurm.policies.")]
    assert len(builtins) >= 20
    for spec in builtins:
        assert spec.factory.__module__ == f"blox_slurm.policies.{spec.kind}.{spec.name}"


def test_looking_up_one_policy_imports_only_its_module() -> None:
    script = ("import sys\n"
              "from blox_slurm.core import registry\n"
              "spec = registry.get('scheduling', 'las')\n"
              "print(spec.factory.__name__, ' '.join(m for m in sys.modules\n"
              "      if m.startswith('blox_slurm.policies.') and m.count('.') == 3))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["Las", "blox_slurm.policies.scheduling.las"]


class _EntryPoint:
    def __init__(self, name: str, load) -> None:
        self.name, self.load = name, load


def test_entry_point_failure_warns_but_keeps_builtins(monkeypatch, capsys) -> None:
    def broken():
        raise ImportError("no module named 'their_plugin'")

    def good():
        @registry.register("placement", "test-ep-placement")
        class EpPlacement(FirstFit):
            """Test placement from an entry point."""

        return EpPlacement

    def entry_points(group: str):
        assert group == registry.ENTRY_POINT_GROUP
        return [_EntryPoint("their-plugin", broken), _EntryPoint("ok-plugin", good)]

    monkeypatch.setattr(registry, "_loaded", False)
    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    names = {(s.kind, s.name) for s in registry.available()}
    err = capsys.readouterr().err
    assert "policy entry point 'their-plugin' failed to load" in err
    assert "their_plugin" in err
    assert ("scheduling", "fifo") in names and ("placement", "first_fit") in names
    assert ("placement", "test-ep-placement") in names
    assert isinstance(build({"scheduling": "fifo", "admission": "accept_all"}).admission,
                      AcceptAll)
