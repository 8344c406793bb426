"""Drive Jupyter kernels with jupyter_client for `npm run bench` (case sessions).

Run by benchmark/jupyter.mjs with the bench's venv python. Requests come as JSON
lines on stdin, answers go as JSON lines to stdout (nothing else is printed there):

  {"op": "start", "name": "deno", "kernel": "deno"}  -> {"pid", "startMs"}
  {"op": "cells", "name": "deno", "code": "1 + 1", "n": 40, "expect": "2"}
      -> {"times": [ms, ...], "lost": k, "late": k, "errors": [...]}
  {"op": "rss", "name": "deno"}                       -> {"kb": 51234 | null}
  {"op": "stop", "name": "deno"}                      -> {}
  any failure                                         -> {"error": "..."}

A cell's time is what a notebook front end waits for: from `execute` until both
the shell's `execute_reply` and the `status: idle` on iopub that closes the
cell. A cell whose reply says `ok` but whose `execute_result` had not come by
its idle is counted as `lost` (a front end shows nothing for it); one that
comes later, during a later cell, is counted as `late` too.
"""

import json
import re
import sys
import time

from jupyter_client.manager import KernelManager

kernels = {}
TIMEOUT = 30.0
# Deno colours its text/plain (`\x1b[33m2\x1b[39m`): compared without
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def start(req):
    t0 = time.perf_counter()
    km = KernelManager(kernel_name=req["kernel"])
    km.start_kernel()
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    ms = (time.perf_counter() - t0) * 1000
    pid = getattr(km.provisioner, "pid", None)
    kernels[req["name"]] = {"km": km, "kc": kc, "pending": set()}
    return {"pid": pid, "startMs": ms}


def one_cell(k, code, expect):
    """Run one cell; returns (ms, lost, late, error)."""
    kc = k["kc"]
    t0 = time.perf_counter()
    msg_id = kc.execute(code, store_history=True)
    result = None
    late = 0
    deadline = time.monotonic() + TIMEOUT
    while True:
        msg = kc.get_iopub_msg(timeout=max(0.0, deadline - time.monotonic()))
        parent = msg["parent_header"].get("msg_id")
        kind = msg["msg_type"]
        if parent != msg_id:
            # the result of an earlier cell that came after that cell's idle
            if kind == "execute_result" and parent in k["pending"]:
                k["pending"].discard(parent)
                late += 1
            continue
        if kind == "execute_result":
            result = ANSI.sub("", msg["content"]["data"].get("text/plain", ""))
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            break
    reply = kc.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
    while reply["parent_header"].get("msg_id") != msg_id:
        reply = kc.get_shell_msg(timeout=max(0.0, deadline - time.monotonic()))
    ms = (time.perf_counter() - t0) * 1000
    status = reply["content"]["status"]
    if status != "ok":
        return ms, 0, late, f"reply status {status}"
    if result is None:
        k["pending"].add(msg_id)
        return ms, 1, late, None
    if expect is not None and result != expect:
        return ms, 0, late, f"execute_result {result!r}, expected {expect!r}"
    return ms, 0, late, None


def cells(req):
    k = kernels[req["name"]]
    times, lost, late, errors = [], 0, 0, []
    for _ in range(req["n"]):
        ms, l, lt, err = one_cell(k, req["code"], req.get("expect"))
        times.append(ms)
        lost += l
        late += lt
        if err:
            errors.append(err)
    return {"times": times, "lost": lost, "late": late, "errors": errors[:5]}


def rss(req):
    pid = getattr(kernels[req["name"]]["km"].provisioner, "pid", None)
    return {"kb": rss_kb(pid) if pid else None}


def stop(req):
    k = kernels.pop(req["name"], None)
    if k:
        k["kc"].stop_channels()
        k["km"].shutdown_kernel(now=True)
    return {}


OPS = {"start": start, "cells": cells, "rss": rss, "stop": stop}

for line in sys.stdin:
    if not line.strip():
        continue
    try:
        req = json.loads(line)
        out = OPS[req["op"]](req)
    except Exception as e:  # reported to the bench, which prints it
        out = {"error": f"{type(e).__name__}: {e}"}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
for name in list(kernels):
    stop({"name": name})
