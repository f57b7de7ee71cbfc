"""Parsing a first round's queue read: ``squeue``'s plain records into ``ParsedJob``.

    PYTHONPATH=. python benchmarks/bench_parse_plain.py [--jobs 20000] [--repeats 7]

``bench_controller_fake.py`` hands the controller records already parsed, so it does not see
this part of a first round (a warm round parses only the records whose text changed). The
records are the held world's: 1-GPU jobs held by the plugin, one line each, split and read
as :class:`~blox_slurm.slurm.queue_read.QueueReader` does. Prints the CPU seconds of the
fastest pass.
"""

from __future__ import annotations

import argparse
import time

from blox_slurm.slurm.squeue_plain import PlainFormat, job_from_plain

#: One held 1-GPU job's fields as squeue prints them (the job id is set per record).
HELD_JOB = {
    "job_id": "0", "array_job_id": "0", "array_task": "N/A", "state": "PENDING",
    "priority": "0", "tres_per_job": "N/A", "tres_per_node": "gres/gpu:1",
    "tres_per_task": "N/A", "num_nodes": "1", "tasks": "1", "nodes": "", "cpus": "1",
    "mem_per_tres": "N/A", "min_memory": "1000M", "tres": "cpu=1,mem=1000M,node=1,billing=1",
    "submit_time": "1765000000", "start_time": "0", "end_time": "0", "eligible_time": "0",
    "restarts": "0", "requeue": "1", "req_nodes": "", "exc_nodes": "", "exit_code": "0:0",
    "dependency": "(null)", "user": "alice", "partition": "blox", "account": "ml",
    "reason": "JobHeldUser", "name": "train", "comment": "(null)",
    "admin_comment": "blox:managed", "work_dir": "/home/alice",
}


def output(fmt: PlainFormat, jobs: int) -> str:
    """What ``squeue`` prints for ``jobs`` held jobs in ``fmt``."""
    records = []
    for i in range(jobs):
        fields = {**HELD_JOB, "job_id": str(1000 + i)}
        records.append(fmt.field_end.join(fields[f] for f in fmt.fields) + fmt.record_end)
    return "".join(r + "\n" for r in records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    fmt = PlainFormat.new()
    out = output(fmt, args.jobs)
    best = float("inf")
    for _ in range(args.repeats):
        cpu0 = time.process_time()
        parsed = [job_from_plain(fmt.values(r)) for r in fmt.records(out)]
        best = min(best, time.process_time() - cpu0)
    assert len(parsed) == args.jobs
    print(f"{args.jobs} records: {best:.3f} s CPU, {best / args.jobs * 1e6:.1f} us a record "
          f"(fastest of {args.repeats})")


if __name__ == "__main__":
    main()
