"""Every Prometheus metric family blox-slurm exports, on ``prometheus_client``.

Each :class:`Metrics` owns a registry of its own instead of the library's global default, so
two controllers in one process (tests, the demo beside a test) never collide on a name, and
``/metrics`` shows exactly one controller. The controller and its telemetry receiver share
one :class:`Metrics`: the receiver serves the registry the controller fills.

The families are declared here, in one place, so the endpoint and ``docs/telemetry.md`` can
be checked against a single list; which code fills them is said in each help text.
"""

from __future__ import annotations

from functools import cached_property

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.exposition import choose_encoder

# A ``*_created`` gauge beside every counter and histogram doubles the families a reader of
# ``curl /metrics`` wades through and no dashboard of ours uses; process-wide by design of
# the library, and this process is ours.
disable_created_metrics()

#: Rounds: milliseconds on an idle cluster, seconds when a moved job's requeue is awaited
#: (``grace_seconds``), up to Slurm's 30 s command timeout when slurmctld is slow.
ROUND_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
#: One squeue/scontrol: ~10 ms to a few hundred on a busy slurmctld; retries take seconds.
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: How a managed job stands, as the last round listed it (``blox_managed_jobs{state}``).
JOB_STATES = ("held", "released", "running")
DECISION_KINDS = ("start", "preempt", "move")
POST_RESULTS = ("accepted", "unauthorized", "too_large", "invalid")


class ControllerMetrics:
    """The round's families (filled by :class:`~blox_slurm.slurm.controller.Controller`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = registry
        self.rounds = Counter("blox_rounds", "Scheduling rounds run, failed ones included.",
                              registry=r)
        self.round_errors = Counter(
            "blox_round_errors", "Rounds that ended in an error (Slurm did not answer, a "
            "misconfiguration, or a crash; the log says which).", registry=r)
        self.round_seconds = Histogram(
            "blox_round_seconds", "Wall time of one round, observe to apply.",
            buckets=ROUND_BUCKETS, registry=r)
        self.slurm_call_seconds = Histogram(
            "blox_slurm_call_seconds", "Time of one Slurm client call (retries included), "
            "by verb: the client method, e.g. list_jobs, release, requeue_hold.", ["verb"],
            buckets=CALL_BUCKETS, registry=r)
        self.slurm_calls_last_round = Gauge(
            "blox_slurm_calls_last_round", "slurmctld round trips the last round made.",
            registry=r)
        self.decisions = Counter(
            "blox_decisions", "Decisions the policy made, by kind (start, preempt, move).",
            ["kind"], registry=r)
        self.actions_failed = Counter(
            "blox_actions_failed", "Slurm verbs that failed (see the store's actions table).",
            registry=r)
        self.managed_jobs = Gauge(
            "blox_managed_jobs", "Managed jobs by partition and state as the last round "
            "found them, before it acted: held (waiting, held by blox), released (waiting "
            "for Slurm to start it), running.", ["partition", "state"], registry=r)
        self.heartbeat_age = Gauge(
            "blox_heartbeat_age_seconds", "Age of the heartbeat the job-submit plugin reads, "
            "at scrape time; +Inf when there is none (the plugin fails open).", registry=r)
        self.gpu_allocated_fraction = Gauge(
            "blox_gpu_allocated_fraction", "Share of the managed partitions' GPUs held by "
            "managed jobs, last round.", registry=r)
        self.gpu_utilization_percent = Gauge(
            "blox_gpu_utilization_percent", "Mean GPU utilization over the telemetry window, "
            "last round; NaN without telemetry.", registry=r)
        for kind in DECISION_KINDS:
            self.decisions.labels(kind)
        self.gpu_utilization_percent.set(float("nan"))


class ReceiverMetrics:
    """The telemetry endpoint's families (filled by
    :class:`~blox_slurm.telemetry.receiver.TelemetryReceiver`)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.posts = Counter(
            "blox_telemetry_posts", "Telemetry POSTs received, by outcome (accepted, "
            "unauthorized, too_large, invalid).", ["result"], registry=registry)
        self.samples = Counter("blox_telemetry_samples", "GPU samples buffered.",
                               registry=registry)
        self.last_post = Gauge(
            "blox_telemetry_last_post_timestamp_seconds",
            "When each node last posted telemetry (Unix time).", ["node"], registry=registry)
        for result in POST_RESULTS:
            self.posts.labels(result)


class Metrics:
    """One instance's registry and the families on it: each set is declared on first use
    (a receiver alone serves only its own), once however many parts ask for it. Parts ask
    when they are built, on the thread that builds them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()

    @cached_property
    def controller(self) -> ControllerMetrics:
        return ControllerMetrics(self.registry)

    @cached_property
    def receiver(self) -> ReceiverMetrics:
        return ReceiverMetrics(self.registry)

    def exposition(self, accept: str = "") -> tuple[bytes, str]:
        """The body and content type for a scrape: the text format, or OpenMetrics when the
        scraper's ``Accept`` asks for it (Prometheus does)."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type
