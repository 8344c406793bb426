# The floor of a spawn on this machine: glibc's posix_spawn (clone with
# CLONE_VM|CLONE_VFORK, then execve) and waitpid from a small Python loop,
# nothing else. Served to benchmark/bench.mjs over stdin/stdout, one JSON
# line per request, so that its rounds interleave with the other contenders:
#   {"op": "seq", "n": 100, "argv": ["/bin/true"]}   -> {"ms": [per spawn]}
#   {"op": "burst", "n": 200, "argv": ["/bin/true"]} -> {"wall": ms, "lat": [per spawn]}
import json
import os
import sys
import time

env = dict(os.environ)


def seq(n, argv):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        pid = os.posix_spawn(argv[0], argv, env)
        os.waitpid(pid, 0)
        out.append((time.perf_counter() - t) * 1000)
    return {"ms": out}


def burst(n, argv):
    started = {}
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        started[os.posix_spawn(argv[0], argv, env)] = t
    lat = []
    while started:
        pid, _ = os.waitpid(-1, 0)
        lat.append((time.perf_counter() - started.pop(pid)) * 1000)
    return {"wall": (time.perf_counter() - t0) * 1000, "lat": lat}


for line in sys.stdin:
    req = json.loads(line)
    res = (seq if req["op"] == "seq" else burst)(req["n"], req["argv"])
    sys.stdout.write(json.dumps(res) + "\n")
    sys.stdout.flush()
