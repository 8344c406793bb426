# exec-native: the driver of a persistent Python session.
#
# The addon starts `python3 -u -c <this file>` with stdin connected to one end
# of a socketpair: the control channel. Before any cell runs, the driver moves
# that socket to a private (close-on-exec) descriptor and puts /dev/null on
# fd 0, so cells and their subprocesses read EOF and can never see the
# protocol. stdout and stderr stay the real pipes: whatever a cell prints (even
# text that looks like a protocol message) is output, nothing else.
#
# Protocol: JSON lines on the control socket.
#   driver -> addon  {"ev": "ready", "pid": ..., "version": "3.11.7"}
#   addon -> driver  {"op": "run", "id": 7, "code": "...", "init": false}
#   driver -> addon  {"ev": "start", "id": 7, "count": 3}
#   driver -> addon  {"ev": "done", "id": 7, "count": 3, "status": "ok",
#                     "value": "42" | null, "exception": {...} | null}
# status is "ok", "error" or "interrupted". EOF on the socket ends the driver.
#
# The channel belongs to this process only: a child made by os.fork() in a
# cell closes its copy at once (os.register_at_fork), and a forked child that
# returns from the cell into this loop exits instead of serving requests.
# SIGINT raises KeyboardInterrupt only while a cell runs: the cell runs with
# signal.default_int_handler (or the handler a cell installed), the driver
# waits with a handler that does nothing, so neither the driver's frames nor
# its handler show in a cell.
#
# Python 3.8+ (ast.Module with type_ignores, f-strings).

import ast
import builtins
import json
import linecache
import os
import signal
import socket
import sys
import traceback
import types


def _main():
    ctl = socket.socket(fileno=os.dup(0))  # os.dup: not inheritable
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    reader = ctl.makefile("rb")
    driver_pid = os.getpid()

    def forked_child():
        # a child of os.fork() must never answer on the channel. The fd is
        # closed without touching the reader, whose lock another thread may
        # have held at the fork.
        try:
            os.close(ctl.detach())
        except Exception:
            pass

    os.register_at_fork(after_in_child=forked_child)

    # a REPL's view of the world: '' (the cwd) first on sys.path, argv ['']
    sys.argv = [""]
    if not sys.path or sys.path[0] != "":
        sys.path.insert(0, "")

    # cells run in a fresh __main__ module (so pickle finds their classes)
    main_mod = types.ModuleType("__main__")
    main_mod.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main_mod
    ns = main_mod.__dict__

    # the handler cells run with (a cell may install its own: it is kept for
    # the next cells)
    state = {"count": 0, "handler": signal.default_int_handler}

    def idle(signum, frame):
        # between cells the driver is never interrupted
        pass

    signal.signal(signal.SIGINT, idle)

    def send(msg):
        ctl.sendall(json.dumps(msg).encode("utf-8") + b"\n")

    def clean(text):
        # lone surrogates (from surrogateescape) are not valid JSON text
        return text.encode("utf-8", "backslashreplace").decode("utf-8")

    def flush_output():
        for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
            try:
                if s is not None:
                    s.flush()
            except Exception:
                pass

    own = _main.__code__.co_filename

    def describe(exc, filename):
        tb = exc.__traceback__
        # drop the driver's own frames: the traceback starts in the cell
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        # and none of the driver's frames after it (a handler of the driver)
        t = tb
        while t is not None:
            while t.tb_next is not None and t.tb_next.tb_frame.f_code.co_filename == own:
                t.tb_next = t.tb_next.tb_next
            t = t.tb_next
        exc.__traceback__ = tb
        text = "".join(traceback.format_exception(type(exc), exc, tb))
        sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, tb
        try:
            message = str(exc)
        except Exception:
            message = "<unprintable %s>" % type(exc).__name__
        return {
            "type": clean(type(exc).__name__),
            "message": clean(message),
            "traceback": clean(text),
        }

    def run_cell(code, filename):
        # register the source so tracebacks show the cell's lines
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", dont_inherit=True), ns)
        if last is not None:
            value = eval(compile(last, filename, "eval", dont_inherit=True), ns)
            if value is not None:
                ns["_"] = value
                return clean(repr(value))
        return None

    send({"ev": "ready", "pid": os.getpid(), "version": sys.version.split()[0]})
    while True:
        line = reader.readline()
        if not line:
            break
        try:
            req = json.loads(line)
        except ValueError:
            continue
        rid = req.get("id")
        init = bool(req.get("init"))
        if init:
            filename = "<init>"
        else:
            state["count"] += 1
            filename = "<cell %d>" % state["count"]
        done = {
            "ev": "done",
            "id": rid,
            "count": state["count"],
            "status": "ok",
            "value": None,
            "exception": None,
        }
        outcome = None
        try:
            try:
                # the cell's handler goes in before "start" is sent: the addon
                # delivers a held interrupt as soon as it reads "start", and a
                # SIGINT that found the idle handler would be lost
                signal.signal(signal.SIGINT, state["handler"])
                send({"ev": "start", "id": rid, "count": state["count"]})
                try:
                    outcome = ("ok", run_cell(req.get("code", ""), filename))
                except KeyboardInterrupt as e:
                    outcome = ("interrupted", e)
                except BaseException as e:  # SystemExit too: the session goes on
                    outcome = ("error", e)
            finally:
                if os.getpid() == driver_pid:
                    current = signal.getsignal(signal.SIGINT)
                    signal.signal(signal.SIGINT, idle)
                    if current is not idle and current is not None:
                        state["handler"] = current
        except KeyboardInterrupt as e:
            # SIGINT landed between the cell's end and the idle handler
            if outcome is None:
                outcome = ("interrupted", e)
            if os.getpid() == driver_pid:
                signal.signal(signal.SIGINT, idle)
        if os.getpid() != driver_pid:
            # a child of os.fork() that came back from the cell: it ends here
            if outcome is not None and outcome[0] != "ok":
                try:
                    traceback.print_exception(type(outcome[1]), outcome[1], outcome[1].__traceback__)
                except Exception:
                    pass
            flush_output()
            os._exit(0 if outcome is not None and outcome[0] == "ok" else 1)
        status, payload = outcome
        done["status"] = status
        if status == "ok":
            done["value"] = payload
        else:
            try:
                info = describe(payload, filename)
            except Exception as e:  # a broken __str__ or the like
                info = {"type": type(payload).__name__, "message": "", "traceback": repr(e)}
            done["exception"] = info
            try:
                sys.stderr.write(info["traceback"])
            except Exception:
                pass
        flush_output()
        try:
            send(done)
        except (TypeError, ValueError):
            done["value"] = None
            send(done)
    sys.exit(0)


_main()
