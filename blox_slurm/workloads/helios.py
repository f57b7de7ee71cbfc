"""SenseTime Helios ``cluster_log.csv`` (S-Lab-System-Group/HeliosData, SC'21).

Followed: the repository's README, "Schema and Description" of ``cluster_log.csv``: a CSV with
a header, one row per job submitted to Slurm in one cluster (Earth, Saturn, Uranus, Venus)::

    job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue
    1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,
        2020-06-09 18:45:36,249,0                                   (one line in the file)

Read: ``job_id`` (Slurm's id, "reflects the job submission order"), ``user``, ``vc`` (the
virtual cluster), ``gpu_num``, ``cpu_num``, ``state``, and the three times, written
``YYYY-MM-DD HH:MM:SS``; ``node_num``, ``duration`` and ``queue`` are derived or unused.

What becomes a job is :mod:`.job_table`'s rule (``duration = end_time - start_time``; jobs that
never started, still running, CPU-only or of zero run time are filtered). Specific to Helios:
ids are the trace's own ``job_id`` (integers, unique per cluster, so a job can be looked up in
the trace; a repeated one is a bad row) and ``account`` is the ``vc``, which is what Helios
shares GPUs by.
"""

from __future__ import annotations

from collections.abc import Collection
from os import PathLike

from .job_table import TableFormat, load_job_table
from .schema import Workload

HELIOS = TableFormat(
    name="helios",
    time_format="%Y-%m-%d %H:%M:%S",
    origin="data/<cluster>/cluster_log.csv from S-Lab-System-Group/HeliosData (data.zip)",
    id_column="job_id",
    account_column="vc",
)


def load_helios(
    path: str | PathLike[str],
    states: Collection[str] | None = None,
    skip_bad_rows: bool = False,
) -> Workload:
    """``states`` keeps only jobs whose ``state`` is listed (default: every state)."""
    return load_job_table(path, HELIOS, states, skip_bad_rows)
