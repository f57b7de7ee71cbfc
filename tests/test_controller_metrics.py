"""What the controller exports at /metrics, driven against the in-memory Slurm and scraped
over real HTTP: every family with HELP and TYPE from the start, the round and Slurm-call
histograms, jobs per partition and state, the heartbeat's age, errors counted."""

from __future__ import annotations

import http.client
import math
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import _prometheus as prometheus
import pytest
from prometheus_client import Histogram

from blox_slurm.core.model import GpuSample
from blox_slurm.loading import load
from blox_slurm.slurm.client import SlurmError, SlurmNode
from blox_slurm.slurm.controller import Controller
from blox_slurm.slurm.controller_config import ControllerConfig
from blox_slurm.slurm.store import Store
from blox_slurm.slurm.timed_client import VERBS, timed
from blox_slurm.telemetry.buffer import TelemetryBuffer
from blox_slurm.telemetry.prometheus import Metrics
from blox_slurm.telemetry.receiver import TelemetryReceiver
from blox_slurm.testing.fake_slurm import FakeSlurm

FAMILIES = {
    "blox_rounds_total": "counter",
    "blox_round_errors_total": "counter",
    "blox_round_seconds": "histogram",
    "blox_slurm_call_seconds": "histogram",
    "blox_slurm_calls_last_round": "gauge",
    "blox_decisions_total": "counter",
    "blox_actions_failed_total": "counter",
    "blox_managed_jobs": "gauge",
    "blox_heartbeat_age_seconds": "gauge",
    "blox_gpu_allocated_fraction": "gauge",
    "blox_gpu_utilization_percent": "gauge",
    "blox_telemetry_posts_total": "counter",
    "blox_telemetry_samples_total": "counter",
    "blox_telemetry_last_post_timestamp_seconds": "gauge",
}


def controller(fake: FakeSlurm, tmp: Path, partitions: tuple[str, ...] = ("blox",),
               clock: Callable[[], float] | None = None, **kw: object) -> Controller:
    cfg = ControllerConfig(store=str(tmp / "state.db"), heartbeat=str(tmp / "heartbeat"),
                           plugin_config="", partitions=list(partitions))
    return Controller(cfg, load("fifo"), fake, Store(cfg.store),
                      clock=clock or (lambda: fake.now), **kw)  # type: ignore[arg-type]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeSlurm, Controller, TelemetryReceiver]]:
    """A controller and its endpoint sharing one Metrics, as ``blox-slurm run`` wires them."""
    fake = FakeSlurm([(2, 4)])
    ctl = controller(fake, tmp_path)
    with TelemetryReceiver("token", port=0, metrics=ctl.metrics) as receiver:
        yield fake, ctl, receiver


def scrape(receiver: TelemetryReceiver) -> dict[str, prometheus.Family]:
    conn = http.client.HTTPConnection(receiver.host, receiver.port, timeout=5)
    try:
        conn.request("GET", "/metrics")
        response = conn.getresponse()
        assert response.status == 200
        return prometheus.parse(response.read().decode())
    finally:
        conn.close()


def sample(families: dict[str, prometheus.Family], name: str, **labels: str) -> float:
    return prometheus.values(families)[(name, tuple(sorted(labels.items())))]


def test_every_family_has_help_and_type_before_the_first_round(
        served: tuple[FakeSlurm, Controller, TelemetryReceiver]) -> None:
    _, _, receiver = served
    families = scrape(receiver)
    assert {name: f.type for name, f in families.items()} == FAMILIES
    assert all(len(f.help) > 15 for f in families.values())
    assert sample(families, "blox_round_errors_total") == 0  # there from the start
    assert sample(families, "blox_rounds_total") == 0
    assert sample(families, "blox_round_seconds_count") == 0
    for kind in ("start", "preempt", "move"):
        assert sample(families, "blox_decisions_total", kind=kind) == 0
    assert sample(families, "blox_heartbeat_age_seconds") == math.inf  # none written yet
    assert math.isnan(sample(families, "blox_gpu_utilization_percent"))


def test_the_reader_refuses_a_family_without_help() -> None:
    """The check above is only as good as the reader: it must fail on what it looks for."""
    with pytest.raises(AssertionError, match="HELP"):
        prometheus.parse("# TYPE x_total counter\nx_total 1\n")
    with pytest.raises(AssertionError):
        prometheus.parse("# HELP x_total Things.\nx_total 1\n")


def test_rounds_export_jobs_per_partition_and_state(
        served: tuple[FakeSlurm, Controller, TelemetryReceiver]) -> None:
    """FIFO on 8 GPUs with three 4-GPU jobs: round 1 sees them held and releases two; round 2
    (Slurm has not scheduled yet) sees them released; round 3, after Slurm started them,
    sees them running, and the third still held."""
    fake, ctl, receiver = served
    for _ in range(3):
        fake.submit_job(4, runtime=600.0)
    seen = []
    for move_on in (False, False, True):
        if move_on:
            fake.advance(30.0)
        ctl.round()
        families = scrape(receiver)
        seen.append({s: sample(families, "blox_managed_jobs", partition="blox", state=s)
                     for s in ("held", "released", "running")})
    assert seen == [{"held": 3, "released": 0, "running": 0},
                    {"held": 1, "released": 2, "running": 0},
                    {"held": 1, "released": 0, "running": 2}]
    assert sample(families, "blox_gpu_allocated_fraction") == 1.0
    assert sample(families, "blox_decisions_total", kind="start") >= 2
    assert sample(families, "blox_actions_failed_total") == 0


def test_each_partition_has_its_own_counts(tmp_path: Path) -> None:
    fake = FakeSlurm([(2, 4)])
    fake.nodes["node2"].partitions = ("debug",)
    fake.submit_job(1, runtime=60.0)
    fake.submit_job(1, runtime=60.0, partition="debug")
    fake.submit_job(1, runtime=60.0, partition="debug")
    fake.submit_job(1, runtime=60.0, partition="elsewhere")  # not managed: not counted
    ctl = controller(fake, tmp_path, partitions=("blox", "debug"))
    ctl.round()
    gauge = ctl.metrics.registry.get_sample_value
    counts = {(p, s): gauge("blox_managed_jobs", {"partition": p, "state": s})
              for p in ("blox", "debug", "elsewhere") for s in ("held", "released")}
    assert counts == {("blox", "held"): 1, ("blox", "released"): 0,
                      ("debug", "held"): 2, ("debug", "released"): 0,
                      ("elsewhere", "held"): None, ("elsewhere", "released"): None}


def test_round_time_and_slurm_calls_are_histograms(tmp_path: Path) -> None:
    """A clock that moves 0.1 s per reading makes every round take time: the histogram's sum
    is the rounds' own seconds, its count the rounds; each Slurm verb is timed by name."""
    fake = FakeSlurm([(2, 4)])
    for gpus in (4, 4, 2):
        fake.submit_job(gpus, runtime=600.0)
    ticks = iter(range(1_000_000))
    ctl = controller(fake, tmp_path, clock=lambda: fake.now + next(ticks) / 10)
    reports = []
    for _ in range(4):
        reports.append(ctl.round())
        fake.advance(30.0)
    value = ctl.metrics.registry.get_sample_value
    assert value("blox_rounds_total") == value("blox_round_seconds_count") == 4
    assert value("blox_round_seconds_sum") == pytest.approx(sum(r.seconds for r in reports))
    assert all(r.seconds > 0 for r in reports)
    assert value("blox_slurm_calls_last_round") == reports[-1].slurm_calls
    calls = Counter(r["verb"] for r in ctl.store.db.query("SELECT verb FROM actions"))
    assert calls["release"] >= 1
    assert value("blox_slurm_call_seconds_count", {"verb": "release"}) == calls["release"]
    for verb in ("list_jobs", "list_nodes"):  # one of each per round
        assert value("blox_slurm_call_seconds_count", {"verb": verb}) == 4
    timed_calls = sum(value("blox_slurm_call_seconds_count", {"verb": v}) or 0 for v in VERBS)
    assert timed_calls == sum(r.slurm_calls for r in reports) == fake.calls


class NoNodes(FakeSlurm):
    """slurmctld stops answering the node list."""

    def list_nodes(self) -> list[SlurmNode]:
        self.calls += 1
        raise SlurmError("slurm_load_node error: Unable to contact slurm controller")


def test_a_failed_round_is_counted_and_its_failing_call_timed(tmp_path: Path) -> None:
    ctl = controller(NoNodes([(1, 4)]), tmp_path)
    report = ctl.round()
    assert "Unable to contact" in report.error
    value = ctl.metrics.registry.get_sample_value
    assert value("blox_round_errors_total") == value("blox_rounds_total") == 1
    assert value("blox_round_seconds_count") == 1
    assert value("blox_slurm_call_seconds_count", {"verb": "list_nodes"}) == 1


class NoWait(threading.Event):
    """The daemon loop's stop event, minus the wait for the next round."""

    def wait(self, timeout: float | None = None) -> bool:
        return False


def test_a_crashed_round_is_counted_as_an_error(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    ctl = controller(FakeSlurm([(1, 4)]), tmp_path)

    def crash() -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(ctl, "round", crash)
    assert ctl.run(NoWait(), max_rounds=2) == 2
    value = ctl.metrics.registry.get_sample_value
    assert value("blox_round_errors_total") == value("blox_rounds_total") == 2


def test_heartbeat_age_is_read_when_scraped(
        served: tuple[FakeSlurm, Controller, TelemetryReceiver]) -> None:
    """No round needed for the age to grow: a controller stuck mid-round must show it."""
    fake, ctl, receiver = served
    ctl.round()
    assert sample(scrape(receiver), "blox_heartbeat_age_seconds") == 0
    fake.now += 45.0
    assert sample(scrape(receiver), "blox_heartbeat_age_seconds") == 45.0
    Path(ctl.cfg.heartbeat).unlink()  # what the plugin then sees: no controller
    assert sample(scrape(receiver), "blox_heartbeat_age_seconds") == math.inf


def test_gpu_utilization_is_the_telemetry_mean_and_nan_without_it(tmp_path: Path) -> None:
    fake = FakeSlurm([(1, 4)])
    buffer = TelemetryBuffer()
    ctl = controller(fake, tmp_path, telemetry=buffer)
    ctl.round()
    value = ctl.metrics.registry.get_sample_value
    assert math.isnan(value("blox_gpu_utilization_percent") or 0.0)
    buffer.add("node1", [GpuSample(0, fake.now, 50.0), GpuSample(1, fake.now, 70.0)])
    ctl.round()
    assert value("blox_gpu_utilization_percent") == 60.0


def test_two_controllers_in_one_process_count_apart(tmp_path: Path) -> None:
    """Each has its own registry, not prometheus_client's global one."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = controller(FakeSlurm([(1, 4)]), tmp_path / "a")
    b = controller(FakeSlurm([(1, 4)]), tmp_path / "b")
    a.round()
    assert a.metrics.registry.get_sample_value("blox_rounds_total") == 1
    assert b.metrics.registry.get_sample_value("blox_rounds_total") == 0


def test_the_timed_client_times_protocol_verbs_only() -> None:
    """Only the SlurmClient methods get a label (a fixed set); anything else passes through
    untimed, and a call that raises is timed too."""
    hist = Histogram("t_seconds", "Test.", ["verb"], registry=Metrics().registry)
    fake = NoNodes([(1, 4)])
    client = timed(fake, hist)
    client.list_jobs()
    with pytest.raises(SlurmError):
        client.list_nodes()
    assert client.calls == 2 and client.nodes is fake.nodes  # type: ignore[attr-defined]
    counts = {s.labels["verb"]: s.value for m in hist.collect() for s in m.samples
              if s.name == "t_seconds_count"}
    assert counts == {"list_jobs": 1, "list_nodes": 1}
    assert "calls" not in VERBS and {"release", "requeue_hold", "update_jobs"} <= VERBS
