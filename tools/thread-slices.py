#!/usr/bin/env python3
"""A server's CPU by thread in slices of time, next to sipp's and the
machine's idle time: where the cores go while a benchmark runs.

    python3 tools/thread-slices.py <server pid> [slice seconds, 0.25]

Samples /proc every slice until it is stopped (SIGTERM or SIGINT), then
prints one row a slice, in cores (1.00 is one core busy for the whole
slice): sipp's (any process named sipp), the machine's idle time, and the
server's threads grouped by name (trailing digits dropped, so the webhook
senders are one column; the coroutine workers carry the binary's name),
the busiest groups first. tools/sip-bench.sh runs it over the leased
calls. The kernel counts CPU in clock ticks (CLK_TCK, usually 100 a
second), so a 0.25 s slice reads in steps of 0.04 core.

Not for: sampling stacks (perf does that), or a figure on its own: it
shows the shape of a run next to the figures the benchmark prints.
"""

import os
import re
import signal
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def ticks(stat_path):
    """utime + stime of one /proc stat file, or None once it is gone."""
    try:
        text = open(stat_path).read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]) + int(fields[12])


def thread_groups(pid):
    """Ticks by thread-name group of process `pid`."""
    groups = {}
    base = f"/proc/{pid}/task"
    try:
        tids = os.listdir(base)
    except OSError:
        return groups
    for tid in tids:
        try:
            name = open(f"{base}/{tid}/comm").read().strip()
        except OSError:
            continue
        used = ticks(f"{base}/{tid}/stat")
        if used is not None:
            # "webhook-sender-3" and the kernel's 15-byte cut of
            # "webhook-sender-12" ("webhook-sender-") are one group.
            group = re.sub(r"[-_]\d*$|\d+$", "", name) or name
            groups[group] = groups.get(group, 0) + used
    return groups


def sipp_ticks():
    """Ticks of every running process named sipp."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if open(f"/proc/{entry}/comm").read().strip() != "sipp":
                continue
        except OSError:
            continue
        total += ticks(f"/proc/{entry}/stat") or 0
    return total


def idle_ticks():
    """The machine's idle ticks, all CPUs (the first line of /proc/stat)."""
    return int(open("/proc/stat").readline().split()[4])


def snapshot(pid):
    snap = thread_groups(pid)
    snap[" sipp"] = sipp_ticks()
    snap[" idle"] = idle_ticks()
    return snap


def main():
    if len(sys.argv) < 2 or not sys.argv[1].isdigit():
        sys.exit("usage: thread-slices.py <server pid> [slice seconds]")
    pid = int(sys.argv[1])
    step = float(sys.argv[2]) if len(sys.argv) > 2 else 0.25
    stopped = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopped.append(True))
    rows, prev = [], snapshot(pid)
    start = last = time.monotonic()
    while not stopped and os.path.exists(f"/proc/{pid}"):
        time.sleep(step)
        now = time.monotonic()
        cur = snapshot(pid)
        # sipp's count restarts when a new sipp starts: never below zero.
        delta = {k: max(0, v - prev.get(k, 0)) for k, v in cur.items()}
        rows.append((now - start, now - last, delta))
        prev, last = cur, now
    if not rows:
        return
    totals = {}
    for _, _, delta in rows:
        for k, v in delta.items():
            totals[k] = totals.get(k, 0) + v
    threads = sorted((k for k in totals if not k.startswith(" ")), key=lambda k: -totals[k])
    columns = [" sipp", " idle"] + threads[:8]
    print("   t (s) " + " ".join(f"{c.strip()[:14]:>14}" for c in columns))
    for at, span, delta in rows:
        cores = (delta.get(c, 0) / HZ / max(span, 1e-9) for c in columns)
        print(f"   {at:5.2f} " + " ".join(f"{v:14.2f}" for v in cores))


if __name__ == "__main__":
    main()
