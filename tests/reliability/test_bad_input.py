"""Bad input, tried at scale, without Slurm (issue 5, item 4): every input gets a clear error of
the documented type and nothing else.

* ``--comment`` hints: a hand-written hostile corpus and a hypothesis corpus through the Python
  parser (the Lua plugin agrees with it, ``tests/test_job_submit_grammar.py``; the real plugin
  is driven through ``sbatch`` in ``test_bad_input_live.py``);
* controller configs and compositions: hypothesis tables, hand-written ones and non-TOML bytes
  -> :class:`ConfigError` / :class:`CompositionError`;
* trace files: random byte corruption of a valid file of every loader -> :class:`WorkloadError`
  naming the file (and the line for a row), or a count with ``skip_bad_rows``;
* telemetry POSTs over real HTTP: missing/wrong token, oversized, garbage, deep nesting, huge
  numbers, NaN -> 4xx and the receiver keeps serving;
* the ``blox-slurm`` CLI on bad input -> exit 2 and one line on stderr.

Cases tried are counted per category and printed (``-s``) at the end of the module.
"""

from __future__ import annotations

import http.client
import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from blox_slurm.core.composition import CompositionError, build
from blox_slurm.slurm.controller_config import ConfigError, load_config
from blox_slurm.slurm.job_submit import MAX_COMMENT, HintError, parse_user_hints
from blox_slurm.telemetry.receiver import TelemetryReceiver
from blox_slurm.telemetry.schema import MAX_BODY_BYTES
from blox_slurm.workloads import WorkloadError, load_workload

pytestmark = pytest.mark.reliability

COUNTS: dict[str, int] = {}
HYP = settings(max_examples=300, deadline=None, derandomize=True, database=None,
               suppress_health_check=list(HealthCheck))


def count(category: str, n: int = 1) -> None:
    COUNTS[category] = COUNTS.get(category, 0) + n


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    for k, v in sorted(COUNTS.items()):
        print(f"\n[reliability] bad input: {k}: {v} cases", end="")
    print(f"\n[reliability] bad input (pure) total: {sum(COUNTS.values())} cases")


# --------------------------------------------------------------------------- hints

CANARY = "/tmp/pwned-blox-XYZ"
OTHER_JOB = 1  # stands for "another user's job" in the pure corpus; the live test uses a real one

HOSTILE_HINTS: list[str] = [
    f"blox:model=$(touch {CANARY})",
    f"blox:model=`touch {CANARY}`",
    f"blox:model=x;touch {CANARY}",
    f"blox:model=x|touch {CANARY}",
    f"blox:model=x&&touch {CANARY}",
    f"blox:model=x>{CANARY}",
    "blox:model=a\nb",
    "blox:model=a\rb",
    "blox:model=a\tb",
    "blox:model=a b",
    "blox:model=" + "x" * 10_000,
    "blox:" + "iters=1," * 2000,
    "blox:model=résnet",
    "blox:model=ＲＥＳＮＥＴ",
    "blox:model=\u202eevil",
    "blox:model=a\x01b",
    "blox:model=a\x1bb",
    "blox:model=a\x7fb",
    "blox:priority=100000",
    "blox:priority=0",
    "blox:nice=-10000",
    "blox:nice=10",
    f"blox:jobid={OTHER_JOB}",
    f"blox:job_id={OTHER_JOB}",
    "blox:user=root",
    "blox:uid=0",
    "blox:partition=plain",
    "blox:admin_comment=blox:managed",
    "blox:managed",
    "blox:iters=1,iters=2",
    "blox:model=a,model=b",
    "blox:duration=1,duration=1",
    "blox:iters=-1",
    "blox:iters=0",
    "blox:iters=1e9",
    "blox:iters=0x10",
    "blox:iters=99999999999999999999",
    "blox:duration=100000001",
    "blox:duration= 5",
    "blox:iters=１２",
    "blox:",
    "blox:,",
    "blox:=",
    "blox:iters",
    "blox:iters==1",
    "blox:model=a=b",
    "blox:Model=x",
    "blox: model=x",
    "blox:model=" + "a" * 65,
    "blox:" + "k" * 40 + "=1",
    "blox:model=x,",
    "blox:model=x;priority=1",
    "blox:model=x,priority=1",
]


def check_hint_outcome(comment: str) -> str:
    """The parser's answer for ``comment``: ``"none"``, ``"ok"`` or ``"error"``; asserts that
    an accepted hint set is only allowed, well-typed keys and that an error is one clean line
    that never echoes the input (beyond a safe key)."""
    try:
        hints = parse_user_hints(comment)
    except HintError as exc:
        msg = str(exc)
        assert msg.startswith("blox-slurm: ") and len(msg) < 200, msg
        assert msg.isprintable() and msg.isascii(), msg  # no control chars smuggled into logs
        quoted = re.findall(r"'([^']*)'", msg)
        assert all(re.fullmatch(r"[A-Za-z0-9_]{1,32}|=", q) for q in quoted), msg
        return "error"
    except Exception as exc:  # noqa: BLE001 - anything else is the failure
        pytest.fail(f"{comment!r}: {type(exc).__name__}: {exc}")
    if hints is None:
        assert not comment.startswith("blox:")
        return "none"
    assert set(hints) <= {"duration", "iters", "model"}, hints
    assert len(comment.encode("utf-8", "surrogatepass")) <= MAX_COMMENT
    for k, v in hints.items():
        if k == "model":
            assert isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_.+\-]{1,64}", v)
        else:
            assert isinstance(v, int) and 1 <= v <= 10**12
    return "ok"


def test_hostile_hints_are_rejected_by_the_parser() -> None:
    for comment in HOSTILE_HINTS:
        assert check_hint_outcome(comment) == "error", comment
    count("hints: hand-written (parser)", len(HOSTILE_HINTS))


_pieces = st.sampled_from([
    "duration", "iters", "model", "priority", "nice", "jobid", "user", "=", ",", ";", "$(",
    ")", "`", "|", "&", "\n", "\x00", "\x1b", "0", "1", "12", "007", "9" * 16, "-", "é", "resnet",
    "a.b+c", " ", "'", '"', "\\", "blox:",
])
HINTS = st.one_of(
    st.lists(_pieces, max_size=12).map(lambda p: "blox:" + "".join(p)),
    st.text(max_size=80).map(lambda t: "blox:" + t),
    st.text(max_size=600),
    st.builds(lambda k, v: f"blox:{k}={v}", st.sampled_from(["duration", "iters", "model"]),
              st.one_of(st.integers(-5, 10**13).map(str), st.text(max_size=70))),
)


@HYP
@given(HINTS)
def test_hypothesis_hints_never_break_the_parser(comment: str) -> None:
    check_hint_outcome(comment)
    count("hints: hypothesis (parser)")


# --------------------------------------------------------------------------- configs


def toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(v)


def toml_doc(tables: dict[str, dict[str, Any]], top: dict[str, Any] | None = None) -> str:
    out = [f"{k} = {toml_value(v)}" for k, v in (top or {}).items()]
    for name, table in tables.items():
        out.append(f"[{name}]")
        out += [f"{json.dumps(k)} = {toml_value(v)}" for k, v in table.items()]
    return "\n".join(out) + "\n"


CTL_KEYS = ["partitions", "round_seconds", "dry_run", "store", "heartbeat", "lease_seconds",
            "handback_on_exit", "checkpoint_signal", "grace_seconds", "require_mark",
            "slurm_conf", "backend", "composition", "telemetry_listen",
            "telemetry_token_file", "telemetry_window", "telemetry_retention",
            "followup_seconds", "round_second", "priority", "", "Partitions"]
POLICIES = ["fifo", "las", "tiresias", "srtf", "optimus", "first_fit", "consolidated",
            "accept_all", "load_based", "priority", "static", "no_such_policy", "", "FIFO",
            "../etc/passwd"]
SCALARS = st.one_of(
    st.booleans(), st.integers(-2**63, 2**63 - 1), st.floats(allow_nan=True),
    st.text(max_size=20), st.sampled_from(POLICIES), st.just(10**30 * 1.0),
    st.integers(-10**6, 10**6),
)
VALUES = st.one_of(SCALARS, st.lists(SCALARS, max_size=4))
PARAM_KEYS = st.sampled_from(["policy", "thresholds", "k", "promote_knob", "queues", "threshold",
                              "window", "idle_window", "x", "", "min_util", "n"])
SECTION = st.one_of(st.dictionaries(PARAM_KEYS, VALUES, max_size=4),
                    st.sampled_from(POLICIES))
COMPOSITION = st.dictionaries(
    st.sampled_from(["scheduling", "placement", "admission", "preemption", "cluster", "bogus"]),
    SECTION, max_size=5)


def expect_error(fn: Any, exc_type: type[Exception], *args: Any) -> str:
    """Call ``fn``: success -> "ok"; ``exc_type`` with a message -> "error"; else fail."""
    try:
        fn(*args)
    except exc_type as exc:
        assert str(exc).strip(), "an error without a message"
        return "error"
    except Exception as exc:  # noqa: BLE001 - anything else is the failure
        pytest.fail(f"{fn.__name__}{args!r}: {type(exc).__name__}: {exc}")
    return "ok"


@pytest.fixture(scope="module")
def cfgdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="blox-badcfg-") as d:
        yield Path(d)


@HYP
@given(st.dictionaries(st.sampled_from(CTL_KEYS), VALUES, max_size=6), COMPOSITION)
def test_hypothesis_controller_configs_raise_only_config_error(
        cfgdir: Path, controller: dict[str, Any], comp: dict[str, Any]) -> None:
    tables = {"controller": controller}
    tables.update({k: v for k, v in comp.items() if isinstance(v, dict)})
    top = {k: v for k, v in comp.items() if not isinstance(v, dict)}
    p = cfgdir / "controller.toml"
    p.write_text(toml_doc(tables, top), encoding="utf-8", errors="surrogatepass")
    expect_error(load_config, ConfigError, p)
    count("configs: hypothesis controller.toml")


@HYP
@given(COMPOSITION)
def test_hypothesis_compositions_raise_only_composition_error(comp: dict[str, Any]) -> None:
    expect_error(build, CompositionError, comp)
    count("configs: hypothesis compositions")


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.binary(max_size=300))
def test_non_toml_bytes_raise_config_error(cfgdir: Path, raw: bytes) -> None:
    p = cfgdir / "bytes.toml"
    p.write_bytes(raw)
    assert expect_error(load_config, ConfigError, p) == "error"  # no composition in there
    from blox_slurm.loading import load
    expect_error(load, CompositionError, p)
    count("configs: random bytes")


HAND_CONFIGS = [
    '[controller]\ncomposition = "fifo"\nround_secnds = 5\n',  # typo
    '[controller]\ncomposition = "fifo"\npartitions = "blox"\n',
    '[controller]\ncomposition = "fifo"\npartitions = []\n',
    '[controller]\ncomposition = "fifo"\npartitions = ["blox;rm -rf /"]\n',
    '[controller]\ncomposition = "fifo"\nround_seconds = -1\n',
    '[controller]\ncomposition = "fifo"\nround_seconds = 0\n',
    '[controller]\ncomposition = "fifo"\nround_seconds = nan\n',
    '[controller]\ncomposition = "fifo"\nlease_seconds = 1e999\n',
    '[controller]\ncomposition = "fifo"\nround_seconds = 99999999999999999999999\n',
    '[controller]\ncomposition = "fifo"\nbackend = "slurmrestd"\n',
    '[controller]\ncomposition = "fifo"\ndry_run = "maybe"\n',
    '[controller]\ncomposition = "fifo"\nround_seconds = 1e23\n',
    '[controller]\ncomposition = "fifo"\nlease_seconds = inf\n',
    '[controller]\ncomposition = "fifo"\nfollowup_seconds = -3\n',
    '[controller]\ncomposition = "fifo"\nfollowup_seconds = nan\n',
    '[controller]\ncomposition = "fifo"\nfollowup_seconds = "soon"\n',
    '[controller]\ncomposition = "no_such_composition"\n',
    '[controller]\ncomposition = "/etc/passwd"\n',
    '[controller]\ncomposition = "fifo"\n[scheduling]\npolicy = "fifo"\n',
    '[controller]\n',
    '[controller]\n[scheduling]\npolicy = "no_such_policy"\n',
    '[controller]\n[scheduling]\npolicy = "tiresias"\nthresholds = "many"\n',
    '[controller]\n[scheduling]\npolicy = "tiresias"\nthreshold = [1]\n',
    '[controller]\n[scheduling]\npolicy = 5\n',
    '[controller]\n[scheduling]\npolicy = "fifo"\n[placement]\npolicy = "fifo"\n',
    '[controller]\n[scheduling]\npolicy = "fifo"\n[bogus]\nx = 1\n',
    'controller = 5\n',
    '[controller]\ncomposition = "fifo"\n[controller]\ncomposition = "las"\n',
    '[controller\ncomposition = "fifo"\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\ntype_speed = {k80 = 0}\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\ntype_speed = {k80 = "x"}\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\ntype_speed = {k80 = inf}\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\nkind = "gavel"\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\nkind = "gavel"\n'
    'path = "/nonexistent/simulation_throughputs.json"\n',
    '[controller]\ncomposition = "gavel"\n[controller.throughput]\nkind = "measured"\n',
    '\x00\x01\x02',
    '',
]


def test_hand_written_bad_configs_raise_config_error(cfgdir: Path) -> None:
    for i, text in enumerate(HAND_CONFIGS):
        p = cfgdir / f"hand{i}.toml"
        p.write_text(text)
        assert expect_error(load_config, ConfigError, p) == "error", text
    for raw in (b"\xff\xfe[controller]\n", b"[controller]\ncomposition = \"\xc3\x28\"\n"):
        p = cfgdir / "latin.toml"
        p.write_bytes(raw)
        assert expect_error(load_config, ConfigError, p) == "error", raw
    assert expect_error(load_config, ConfigError, cfgdir) == "error"  # a directory
    assert expect_error(load_config, ConfigError, cfgdir / "missing.toml") == "error"
    count("configs: hand-written", len(HAND_CONFIGS) + 4)


# --------------------------------------------------------------------------- traces

GAVEL_TABLE = {"v100": {"('A', 1)": {"null": 10.0}, "('A', 2)": {"null": 16.0},
                        "('B', 1)": {"null": 5.0}}}


def _gavel_line(t: str, steps: str, arrival: str, gpus: str) -> str:
    return "\t".join([t, "cd %s && python3 train.py", "--steps", "1", steps, arrival, gpus])


def _philly_entry(i: int) -> dict[str, Any]:
    return {"status": "Pass", "vc": "ee9e8c", "jobid": f"application_1_{i}",
            "submitted_time": "2017-10-07 01:11:39", "user": "u1",
            "attempts": [{"start_time": "2017-10-07 01:12:09", "end_time": "2017-10-07 02:13:23",
                          "detail": [{"ip": "m0", "gpus": ["gpu0", "gpu1"]}]}]}


VALID_TRACES: dict[str, bytes] = {
    "w.csv": (b"job_id,submit_time,num_gpus,duration,model,user\n"
              b"7,20.5,4,100,ResNet-50,bob\n3,0,1,3600.25,,alice\n5,20.5,2,1e3,LM,carol\n"),
    "w.trace": ("\n".join([_gavel_line("A", "1000", "0", "1"), _gavel_line("A", "3200", "6.5", "2"),
                           _gavel_line("B", "50", "3", "1")]) + "\n").encode(),
    "cluster_job_log": json.dumps([_philly_entry(i) for i in range(3)], indent=1).encode(),
    "w.sacct": (
        b"JobID|User|Account|Partition|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|State\n"
        b"101|alice|ml|gpu|2024-01-05T10:00:00|2024-01-05T10:05:00|2024-01-05T11:05:00|01:00:00|"
        b"billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|cpu=8,gres/gpu=2|COMPLETED\n"
        b"102|bob|vision|gpu|2024-01-05T09:59:30|2024-01-05T10:00:00|2024-01-05T10:00:45|"
        b"00:00:45|cpu=4,gres/gpu=3|cpu=4,gres/gpu=3|FAILED\n"),
    "gen.toml": (b"[workload]\nn_jobs = 20\njobs_per_hour = 7\nseed = 5\nmeasure = [0, 20]\n"
                 b'[workload.gpu_demand]\n"1" = 0.5\n"4" = 0.5\n'),
}


@pytest.fixture(scope="module")
def tracedir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="blox-badtrace-") as d:
        p = Path(d)
        (p / "simulation_throughputs.json").write_text(json.dumps(GAVEL_TABLE))
        yield p


def test_valid_trace_files_load(tracedir: Path) -> None:
    """The corruption tests start from files every loader accepts."""
    for name, data in VALID_TRACES.items():
        (tracedir / name).write_bytes(data)
        assert load_workload(tracedir / name).jobs, name


MUTATION = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255),
                              st.sampled_from(["set", "insert", "delete"])), min_size=1,
                    max_size=6)


def corrupt(data: bytes, edits: list[tuple[int, int, str]]) -> bytes:
    b = bytearray(data)
    for pos, byte, op in edits:
        i = pos % (len(b) + 1)
        if op == "insert" or not b:
            b.insert(i, byte)
        elif op == "set":
            b[min(i, len(b) - 1)] = byte
        else:
            del b[min(i, len(b) - 1)]
    return bytes(b)


@settings(max_examples=80, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(VALID_TRACES)), MUTATION, st.booleans())
def test_corrupted_traces_raise_only_workload_error(tracedir: Path, name: str,
                                                    edits: list[tuple[int, int, str]],
                                                    skip: bool) -> None:
    path = tracedir / f"corrupt-{name}"
    path.write_bytes(corrupt(VALID_TRACES[name], edits))
    fmt = {"cluster_job_log": "philly"}.get(name)
    try:
        w = load_workload(path, format=fmt, skip_bad_rows=skip)
    except WorkloadError as exc:
        msg = str(exc)
        assert str(path) in msg or path.name in msg, msg  # names the file
        if not skip and re.search(r"\bline\b|:\d+:", msg) is None:
            # file-level problems (header, encoding, JSON) need no line; row ones carry it
            assert any(w in msg.lower() for w in ("header", "json", "empty", "toml", "utf",
                                                   "decode", "expected", "generator",
                                                   "column", "field", "must")), msg
        count("traces: corrupted -> WorkloadError")
        return
    except Exception as exc:  # noqa: BLE001 - anything else is the failure
        pytest.fail(f"{name} corrupted by {edits}: {type(exc).__name__}: {exc}")
    assert w.skipped_rows >= 0 and (skip or w.skipped_rows == 0)
    count("traces: corrupted -> loaded" + (" (skip_bad_rows)" if skip else ""))


def test_bad_rows_name_the_line_or_are_counted(tracedir: Path) -> None:
    p = tracedir / "rows.csv"
    p.write_text("job_id,submit_time,num_gpus,duration\n1,0,1,10\n2,x,1,10\n3,0,-1,10\n"
                 "4,0,1,nan\n5,0,1,10\n")
    with pytest.raises(WorkloadError, match=rf"{re.escape(str(p))}:3: "):
        load_workload(p)
    w = load_workload(p, skip_bad_rows=True)
    assert [j.id for j in w.jobs] == [1, 5] and w.skipped_rows == 3
    count("traces: hand-written bad rows", 2)


# --------------------------------------------------------------------------- telemetry

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def receiver() -> Iterator[TelemetryReceiver]:
    with TelemetryReceiver(TOKEN, request_timeout=2.0) as r:
        yield r


def post(r: TelemetryReceiver, body: bytes, token: str | None = TOKEN,
         headers: dict[str, str] | None = None, length: bool = True) -> int:
    conn = http.client.HTTPConnection(r.host, r.port, timeout=10)
    try:
        conn.putrequest("POST", "/telemetry")
        if token is not None:
            conn.putheader("Authorization", f"Bearer {token}")
        if length:
            conn.putheader("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        try:
            conn.send(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before the whole body was read: the status is still sent
        return conn.getresponse().status
    finally:
        conn.close()


def healthy(r: TelemetryReceiver) -> bool:
    conn = http.client.HTTPConnection(r.host, r.port, timeout=5)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status == 200
    finally:
        conn.close()


def sample(**over: Any) -> dict[str, Any]:
    return {"gpu": 0, "time": 1.0, "utilization": 50.0, **over}


def batch(**over: Any) -> bytes:
    return json.dumps({"node": "node1", "samples": [sample()], **over}).encode()


TELEMETRY_CASES: list[tuple[str, dict[str, Any], int]] = [
    ("no token", {"body": batch(), "token": None}, 401),
    ("wrong token", {"body": batch(), "token": "wrong"}, 401),
    ("token prefix", {"body": batch(), "token": TOKEN[:-1]}, 401),
    ("token plus junk", {"body": batch(), "token": TOKEN + "x"}, 401),
    ("empty token", {"body": batch(), "token": ""}, 401),
    ("unicode token", {"body": batch(), "token": "s3cr\u00e9t"}, 401),
    ("no token, oversized", {"body": b"x" * (MAX_BODY_BYTES + 10), "token": None}, 401),
    ("oversized", {"body": b"[" * (MAX_BODY_BYTES + 1)}, 413),
    ("declared huge", {"body": b"{}", "length": False,
                       "headers": {"Content-Length": str(10**15)}}, 413),
    ("negative length", {"body": b"", "length": False, "headers": {"Content-Length": "-5"}}, 400),
    ("garbage length", {"body": b"", "length": False,
                        "headers": {"Content-Length": "12abc"}}, 400),
    ("no length", {"body": b"", "length": False}, 411),
    ("empty body", {"body": b""}, 400),
    ("garbage", {"body": os.urandom(2000)}, 400),
    ("not utf-8", {"body": b'{"node": "\xff\xfe", "samples": []}'}, 400),
    ("deep nesting", {"body": b'{"node": "n", "samples": ' + b"[" * 50_000 + b"]" * 50_000
                      + b"}"}, 400),
    ("deep objects", {"body": b'{"a":' * 20_000 + b"1" + b"}" * 20_000}, 400),
    ("huge number", {"body": batch(samples=[sample(time=10**400)])}, 400),
    ("huge int gpu", {"body": batch(samples=[sample(gpu=10**30)])}, 400),
    ("NaN literal", {"body": b'{"node":"n","samples":[{"gpu":0,"time":NaN,"utilization":1}]}'},
     400),
    ("NaN string", {"body": batch(samples=[sample(utilization="NaN")])}, 400),
    ("Infinity", {"body": b'{"node":"n","samples":[{"gpu":0,"time":1,"utilization":Infinity}]}'},
     400),
    ("string number", {"body": batch(samples=[sample(gpu="1")])}, 400),
    ("negative", {"body": batch(samples=[sample(time=-1)])}, 400),
    ("too many samples", {"body": batch(samples=[sample()] * 5000)}, 400),
    ("too many job ids", {"body": batch(samples=[sample(job_ids=list(range(100)))])}, 400),
    ("bad node name", {"body": batch(node="../../etc;rm")}, 400),
    ("node with newline", {"body": batch(node="n\nx")}, 400),
    ("extra key", {"body": batch(evil=1)}, 400),
    ("array body", {"body": b"[]"}, 400),
    ("null body", {"body": b"null"}, 400),
    ("duplicate keys", {"body": b'{"node":"n","node":"m","samples":[],"samples":1}'}, 400),
    ("shell in job id", {"body": batch(samples=[sample(job_ids=["$(reboot)"])])}, 400),
]


def test_bad_telemetry_posts_get_4xx_and_the_receiver_keeps_serving(
        receiver: TelemetryReceiver) -> None:
    got = {}
    for name, kw, _status in TELEMETRY_CASES:
        got[name] = post(receiver, **kw)
        assert healthy(receiver), f"receiver down after {name!r}"
    assert got == {name: status for name, _, status in TELEMETRY_CASES}
    assert len(receiver.buffer.window(10**9, 10**9)) == 0  # nothing bad was buffered
    assert post(receiver, batch()) == 200  # and a good post still works
    count("telemetry: hand-written posts", len(TELEMETRY_CASES))


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.one_of(st.binary(max_size=400),
                 st.recursive(st.one_of(st.none(), st.booleans(), st.floats(), st.integers(),
                                        st.text(max_size=10)),
                              lambda c: st.lists(c, max_size=3)
                              | st.dictionaries(st.text(max_size=8), c, max_size=3),
                              max_leaves=20).map(lambda v: json.dumps(v).encode())))
def test_hypothesis_telemetry_bodies_are_4xx_or_accepted(receiver: TelemetryReceiver,
                                                         body: bytes) -> None:
    status, _ = receiver.handle_post(f"Bearer {TOKEN}", body)
    assert status in (200, 400), status
    if status == 200:
        json.loads(body)  # only a real batch could be accepted
    assert receiver.handle_post("Bearer nope", body)[0] == 401
    count("telemetry: hypothesis bodies", 2)


# --------------------------------------------------------------------------- CLI


def test_cli_bad_input_exits_2_with_one_line(tmp_path: Path) -> None:
    bad_toml = tmp_path / "bad.toml"
    bad_toml.write_bytes(b"\xff\xfe[controller\n")
    typo = tmp_path / "typo.toml"
    typo.write_text('[controller]\ncomposition = "fifo"\nround_secnds = 5\n')
    no_comp = tmp_path / "nocomp.toml"
    no_comp.write_text("[controller]\n")
    bad_csv = tmp_path / "w.csv"
    bad_csv.write_text("job_id,submit_time,num_gpus,duration\n1,0,1,banana\n")
    comp = tmp_path / "comp.toml"
    comp.write_text('[scheduling]\npolicy = "tiresias"\nthresholds = "x"\n')
    commands = [
        ["simulate", "--config", "no_such_composition", "--jobs", "5"],
        ["simulate", "--config", str(comp), "--jobs", "5"],
        ["simulate", "--workload", str(tmp_path / "missing.trace")],
        ["simulate", "--workload", str(bad_csv)],
        ["simulate", "--workload", str(bad_csv), "--format", "nope"],
        ["run", "--config", str(tmp_path / "missing.toml"), "--rounds", "1"],
        ["run", "--config", str(bad_toml), "--rounds", "1"],
        ["run", "--config", str(no_comp), "--rounds", "1"],
        ["status", "--config", str(typo)],
        ["handback", "--config", str(bad_toml)],
        ["explain", "1", "--config", str(no_comp)],
        ["report", "--config", str(tmp_path)],
    ]
    failures = []
    for argv in commands:
        p = subprocess.run([sys.executable, "-m", "blox_slurm", *argv], capture_output=True,
                           text=True, timeout=60, env={**os.environ, "COLUMNS": "80"})
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        if p.returncode != 2 or len(lines) != 1 or "Traceback" in p.stderr:
            failures.append((argv, p.returncode, p.stderr[-600:]))
    count("cli: bad commands", len(commands))
    assert not failures, "\n".join(f"{a}: exit {rc}\n{err}" for a, rc, err in failures)
