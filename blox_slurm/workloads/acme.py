"""Shanghai AI Lab AcmeTrace ``trace_seren.csv`` / ``trace_kalos.csv`` (InternLM/AcmeTrace,
NSDI'24).

Followed: the repository's README, "Schema and Description", "1. Job Trace": a CSV with a
header, one row per job submitted to the cluster's scheduler::

    job_id,user,node_num,gpu_num,cpu_num,type,state,submit_time,start_time,end_time,
        duration,queue,gpu_time
    5778432,u5907,1,8,128,Other,FAILED,2023-03-01 00:18:22+08:00,2023-03-01 00:18:54+08:00,
        2023-03-01 00:20:51+08:00,117,32,936.0          (each record is one line in the file)

Kalos adds ``mem_per_pod_GB``, ``shared_mem_per_pod``, ``fail_time`` and ``stop_time``;
columns are found by name, so both files load. Read: ``user``, ``gpu_num``, ``cpu_num``,
``type``, ``state`` and the three times, written ``YYYY-MM-DD HH:MM:SS+HH:MM`` (Seren in
UTC+8, Kalos in UTC; differences are taken with the offsets, so both are right).

What becomes a job is :mod:`.job_table`'s rule (``duration = end_time - start_time``; jobs that
never started, still running, CPU-only or of zero run time are filtered). Specific to Acme:

* ids are 0-based positions of the rows in the file: Kalos's ``job_id`` is a string
  (``dlctk696s0jbvitv``), and one rule for both files is less surprising than two.
* ``model`` is the workload ``type`` (``Pretrain``, ``SFT``, ``Eval``, ``Debug``, ``MLLM``,
  ``Other``): a label a policy or a report can group by; the default throughput model ignores
  it.
* ``memory_mb`` stays 0: Kalos gives memory per *pod*, and the README does not say how many
  pods a job has, so a job total would be a guess.
"""

from __future__ import annotations

from collections.abc import Collection
from os import PathLike

from .job_table import TableFormat, load_job_table
from .schema import Workload

ACME = TableFormat(
    name="acme",
    time_format="%Y-%m-%d %H:%M:%S%z",
    origin="data/job_trace/trace_seren.csv or trace_kalos.csv from InternLM/AcmeTrace",
    model_column="type",
)


def load_acme(
    path: str | PathLike[str],
    states: Collection[str] | None = None,
    skip_bad_rows: bool = False,
) -> Workload:
    """``states`` keeps only jobs whose ``state`` is listed (default: every state)."""
    return load_job_table(path, ACME, states, skip_bad_rows)
