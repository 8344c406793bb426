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
#   driver -> addon  {"ev": "display", "id": 7, "data": {mime: data},
#                     "at": [stdout bytes, stderr bytes]}  (0..n)
#   driver -> addon  {"ev": "done", "id": 7, "count": 3, "status": "ok",
#                     "value": "42" | null, "data": {mime: data} | null,
#                     "exception": {...} | null, "wrote": [stdout, stderr bytes],
#                     "runs": [[stream 0|1, up to byte], ...] | null}
# status is "ok", "error" or "interrupted". EOF on the socket ends the driver.
# The byte counts are what sys.stdout/sys.stderr wrote since the last "done"
# (_Counted): the addon places a bundle among the cell's output by them.
#
# Rich display follows IPython's protocol: `display(obj)` (a builtin) and the
# last expression give a MIME bundle from _repr_mimebundle_, _repr_html_,
# _repr_markdown_, _repr_svg_, _repr_png_, _repr_jpeg_, _repr_json_ and
# _repr_latex_ (binary data as base64). matplotlib gets the Agg backend
# (MPLBACKEND, unless set) and the figures a cell leaves open are shown as
# image/png at its end and closed, as IPython's inline backend does.
#
# The channel belongs to this process only: a child made by os.fork() in a
# cell closes its copy at once (os.register_at_fork), and a forked child that
# returns from the cell into this loop exits instead of serving requests.
# A forked child's output belongs to the cell that forked it: once that cell
# has ended, what the child writes is dropped (_CellOutput), so it never shows
# up in a later cell.
# SIGINT raises KeyboardInterrupt only while a cell runs: the cell runs with
# signal.default_int_handler (or the handler a cell installed), the driver
# waits with a handler that does nothing, so neither the driver's frames nor
# its handler show in a cell.
#
# Windows has no socketpair to hand over as stdin: the addon listens on a
# loopback port and names it in EXEC_NATIVE_SESSION_CTL ("port token"); the
# driver connects, sends the token, and removes the variable (cells and
# their children never see it). stdin is NUL there.
#
# Interrupts: on Linux and macOS the addon sends SIGINT to the driver's
# process group (a cell's subprocesses get it too). On Windows it sends
# {"op": "interrupt"} on the channel: a reader thread reads the channel
# while a cell runs and calls _thread.interrupt_main(), which runs the SIGINT
# handler in the main thread as a real SIGINT would (the idle handler between
# cells, so an interrupt that comes late is dropped). It reaches Python code
# (a `while True` loop), not a blocking call such as time.sleep() until it
# returns, nor a subprocess.
#
# Python 3.8+ (ast.Module with type_ignores, f-strings).

import ast
import base64
import builtins
import io
import json
import linecache
import os
import queue
import select
import signal
import socket
import sys
import threading
import traceback
import _thread
import types

os.environ.setdefault("MPLBACKEND", "agg")


def _idle(signum, frame):
    # the SIGINT handler between cells: the driver is never interrupted
    pass


class _Counted(io.RawIOBase):
    """fd 1 or 2, counting the bytes written through it: a bundle is placed
    among the cell's output by these counts (display's "at", done's "wrote")."""

    # the runs of writes of both streams since the last "done":
    # [stream, up to byte]; None past MAX_RUNS
    runs = []
    base = [0, 0]
    MAX_RUNS = 10000

    def __init__(self, fd):
        super().__init__()
        self.fd = fd
        self.ix = fd - 1
        self.count = 0

    def writable(self):
        return True

    def fileno(self):
        return self.fd

    def isatty(self):
        return os.isatty(self.fd)

    def write(self, b):
        view = memoryview(b).cast("B")
        done = 0
        try:
            while done < len(view):
                done += os.write(self.fd, view[done:])
        finally:
            self.count += done
            if done:
                self._run()
        return done

    def _run(self):
        runs = _Counted.runs
        if runs is None:
            return
        end = self.count - _Counted.base[self.ix]
        if runs and runs[-1][0] == self.ix:
            runs[-1][1] = end
        elif len(runs) < _Counted.MAX_RUNS:
            runs.append([self.ix, end])
        else:
            _Counted.runs = None


def _counted(stream):
    return io.TextIOWrapper(
        _Counted(stream.fileno()), encoding=stream.encoding, errors=stream.errors, write_through=True
    )


def _clean(text):
    # lone surrogates (from surrogateescape) are not valid JSON text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _flush_output():
    for s in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if s is not None:
                s.flush()
        except Exception:
            pass


# the driver's own file name (its frames are cut from a cell's traceback)
_OWN = _idle.__code__.co_filename

_REPRS = (
    ("text/html", "_repr_html_"),
    ("text/markdown", "_repr_markdown_"),
    ("image/svg+xml", "_repr_svg_"),
    ("image/png", "_repr_png_"),
    ("image/jpeg", "_repr_jpeg_"),
    ("application/json", "_repr_json_"),
    ("text/latex", "_repr_latex_"),
)


def _data(mime, value):
    # binary as base64, JSON as itself, the rest as text
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if mime == "application/json" or mime.endswith("+json"):
        return value
    return _clean(str(value))


def _figure_png(fig):
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return buf.getvalue()


def _is_figure(obj):
    mod = sys.modules.get("matplotlib.figure")
    return mod is not None and isinstance(obj, mod.Figure)


def _bundle(obj):
    """The MIME bundle of obj: its rich reprs, and text/plain (repr)."""
    data = {}
    if _is_figure(obj):
        data["image/png"] = _data("image/png", _figure_png(obj))
    method = getattr(type(obj), "_repr_mimebundle_", None)
    if method is not None and not isinstance(obj, type):
        try:
            got = obj._repr_mimebundle_(include=None, exclude=None)
        except TypeError:
            got = obj._repr_mimebundle_()
        if isinstance(got, tuple):
            got = got[0]
        for mime, value in (got or {}).items():
            data[mime] = _data(mime, value)
    for mime, name in _REPRS:
        if mime in data or isinstance(obj, type):
            continue
        method = getattr(obj, name, None)
        if method is None or not callable(method):
            continue
        try:
            value = method()
        except Exception:
            continue
        if isinstance(value, tuple):
            value = value[0]
        if value is not None:
            data[mime] = _data(mime, value)
    if "text/plain" not in data:
        data["text/plain"] = _clean(repr(obj))
    return data


class _CellOutput:
    """sys.stdout / sys.stderr of a forked child: writes go through while
    the cell that forked it runs, and are dropped once it has ended (the
    driver closed the write end of the cell's pipe, so `ended_fd` reads EOF).
    At the first write after that, fds 1 and 2 are pointed at /dev/null too,
    so what the child writes with os.write or runs with exec is dropped as
    well."""

    _over = False

    def __init__(self, stream, ended_fd):
        self._stream = stream
        self._ended_fd = ended_fd

    def _cell_over(self):
        if _CellOutput._over:
            return True
        try:
            ended = bool(select.select([self._ended_fd], [], [], 0)[0])
        except (OSError, ValueError):
            ended = True
        if ended:
            _CellOutput._over = True
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                os.close(null)
            except OSError:
                pass
        return ended

    def write(self, text):
        if self._cell_over():
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        if not self._cell_over():
            self._stream.flush()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _Driver:
    """The channel, the cells' namespace, the number of the last cell and
    the SIGINT handler cells run with (a cell may install its own: it is kept
    for the next cells)."""

    def __init__(self):
        ctl = os.environ.pop("EXEC_NATIVE_SESSION_CTL", None)
        if ctl is not None:
            # Windows: the addon's loopback port (see the top of this file)
            port, token = ctl.split(" ", 1)
            self.ctl = socket.create_connection(("127.0.0.1", int(port)))
            self.ctl.sendall(token.encode("ascii") + b"\n")
        else:
            self.ctl = socket.socket(fileno=os.dup(0))  # os.dup: not inheritable
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.close(null)
        self.reader = self.ctl.makefile("rb")
        # Windows: requests come through a thread that reads the channel at
        # all times, so that an interrupt reaches a running cell
        self.requests = None
        if ctl is not None:
            self.requests = queue.Queue()
            threading.Thread(target=self._read_requests, daemon=True).start()
        self.pid = os.getpid()
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked_child)

        # a REPL's view of the world: '' (the cwd) first on sys.path, argv ['']
        sys.argv = [""]
        if not sys.path or sys.path[0] != "":
            sys.path.insert(0, "")

        # cells run in a fresh __main__ module (so pickle finds their classes)
        main_mod = types.ModuleType("__main__")
        main_mod.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main_mod
        self.ns = main_mod.__dict__

        self.count = 0
        # the running cell's pipe: the driver holds both ends while the cell
        # runs; a forked child keeps the read end, which reads EOF once the
        # driver closed its write end at the end of the cell
        self.cell_ended = None
        self.cell_running = None
        self.handler = signal.default_int_handler
        signal.signal(signal.SIGINT, _idle)
        self.lock = threading.Lock()
        self.rid = None
        builtins.display = self.display
        sys.stdout = _counted(sys.stdout)
        sys.stderr = _counted(sys.stderr)
        self.counted = (sys.stdout.buffer, sys.stderr.buffer)

    def in_cell(self):
        """Bytes of stdout and stderr written through the driver's streams
        since the last "done"."""
        return [c.count - b for c, b in zip(self.counted, _Counted.base)]

    def _forked_child(self):
        # a child of os.fork() must never answer on the channel. The fd is
        # closed without touching the reader, whose lock another thread may
        # have held at the fork.
        try:
            os.close(self.ctl.detach())
        except Exception:
            pass
        # its output is the cell's only while that cell runs (a child of a
        # child keeps what its parent had)
        if self.cell_running is not None:
            try:
                os.close(self.cell_running)
            except OSError:
                pass
            self.cell_running = None
        if self.cell_ended is not None and not isinstance(sys.stdout, _CellOutput):
            sys.stdout = _CellOutput(sys.stdout, self.cell_ended)
            sys.stderr = _CellOutput(sys.stderr, self.cell_ended)

    def send(self, msg):
        line = json.dumps(msg).encode("utf-8") + b"\n"
        with self.lock:  # a cell's threads may display too
            self.ctl.sendall(line)

    def display(self, *objs, raw=False):
        """Show each object as a MIME bundle (raw: obj is the bundle)."""
        for obj in objs:
            data = {m: _data(m, v) for m, v in obj.items()} if raw else _bundle(obj)
            self.send({"ev": "display", "id": self.rid, "data": data, "at": self.in_cell()})

    def flush_figures(self):
        # the figures a cell left open are shown and closed (inline backend)
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is None:
            return
        try:
            for num in plt.get_fignums():
                self.display(plt.figure(num))
            plt.close("all")
        except Exception as e:
            sys.stderr.write("display of the open figures failed: %r\n" % (e,))

    def _read_requests(self):
        # Windows: the channel's reader; an interrupt is handled here, the
        # rest goes to the main thread (None at EOF)
        while True:
            try:
                line = self.reader.readline()
            except OSError:
                line = b""
            if not line:
                self.requests.put(None)
                return
            if line.startswith(b'{"op": "interrupt"') or line.startswith(b'{"op":"interrupt"'):
                _thread.interrupt_main()
                continue
            self.requests.put(line)

    def _next_line(self):
        if self.requests is not None:
            return self.requests.get() or b""
        return self.reader.readline()

    def serve(self):
        """Answer requests until EOF on the channel."""
        self.send({"ev": "ready", "pid": os.getpid(), "version": sys.version.split()[0]})
        while True:
            line = self._next_line()
            if not line:
                break
            try:
                req = json.loads(line)
            except ValueError:
                continue
            self.handle(req)

    def handle(self, req):
        """Run one request and send its "done"."""
        rid = req.get("id")
        if req.get("init"):
            filename = "<init>"
        else:
            self.count += 1
            filename = "<cell %d>" % self.count
        self.rid = rid
        self.cell_ended, self.cell_running = os.pipe()
        try:
            error = req.get("error")
            if error:
                # a compile error found by the addon: the cell fails with it
                self.send({"ev": "start", "id": rid, "count": self.count})
                outcome = ("compile", error)
            else:
                outcome = self.run(rid, req.get("code", ""), filename)
            if os.getpid() == self.pid:
                self.flush_figures()
        finally:
            if os.getpid() == self.pid:
                _flush_output()
                # from now on, what a forked child of the cell writes is dropped
                for fd in (self.cell_running, self.cell_ended):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                self.cell_ended = self.cell_running = None
        if os.getpid() != self.pid:
            self._end_forked_child(outcome)
        done = self.done(rid, outcome, filename)
        _flush_output()
        done["wrote"] = self.in_cell()
        done["runs"] = _Counted.runs
        _Counted.base = [c.count for c in self.counted]
        _Counted.runs = []
        try:
            self.send(done)
        except (TypeError, ValueError):
            done["value"] = None
            done["data"] = None
            self.send(done)

    def run(self, rid, code, filename):
        """Send "start" and run the cell under its SIGINT handler: ("ok",
        value), or ("error" | "interrupted", the exception)."""
        outcome = None
        try:
            try:
                # the cell's handler goes in before "start" is sent: the addon
                # delivers a held interrupt as soon as it reads "start", and a
                # SIGINT that found the idle handler would be lost
                signal.signal(signal.SIGINT, self.handler)
                self.send({"ev": "start", "id": rid, "count": self.count})
                try:
                    outcome = ("ok", self.run_cell(code, filename))
                except KeyboardInterrupt as e:
                    outcome = ("interrupted", e)
                except BaseException as e:  # SystemExit too: the session goes on
                    outcome = ("error", e)
            finally:
                if os.getpid() == self.pid:
                    current = signal.getsignal(signal.SIGINT)
                    signal.signal(signal.SIGINT, _idle)
                    if current is not _idle and current is not None:
                        self.handler = current
        except KeyboardInterrupt as e:
            # SIGINT landed between the cell's end and the idle handler
            if outcome is None:
                outcome = ("interrupted", e)
            if os.getpid() == self.pid:
                signal.signal(signal.SIGINT, _idle)
        return outcome

    def run_cell(self, code, filename):
        # register the source so tracebacks show the cell's lines
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec", dont_inherit=True), self.ns)
        if last is not None:
            value = eval(compile(last, filename, "eval", dont_inherit=True), self.ns)
            if value is not None:
                self.ns["_"] = value
                try:
                    data = _bundle(value)
                except Exception:
                    data = {}
                if _is_figure(value):
                    plt = sys.modules.get("matplotlib.pyplot")
                    if plt is not None:
                        plt.close(value)
                text = data.pop("text/plain", None)
                if text is None:
                    text = _clean(repr(value))
                if data:
                    data["text/plain"] = text
                return (text, data or None)
        return None

    def _end_forked_child(self, outcome):
        # a child of os.fork() that came back from the cell: it ends here
        if outcome is not None and outcome[0] != "ok":
            try:
                traceback.print_exception(type(outcome[1]), outcome[1], outcome[1].__traceback__)
            except Exception:
                pass
        _flush_output()
        os._exit(0 if outcome is not None and outcome[0] == "ok" else 1)

    def done(self, rid, outcome, filename):
        """The "done" message; an exception is also written to stderr."""
        status, payload = outcome
        done = {
            "ev": "done",
            "id": rid,
            "count": self.count,
            "status": status,
            "value": None,
            "data": None,
            "exception": None,
        }
        if status == "ok":
            if payload is not None:
                done["value"], done["data"] = payload
        elif status == "compile":
            done["status"] = "error"
            done["exception"] = payload
        else:
            try:
                info = _describe(payload, filename)
            except Exception as e:  # a broken __str__ or the like
                info = {"type": type(payload).__name__, "message": "", "traceback": repr(e)}
            done["exception"] = info
            try:
                sys.stderr.write(info["traceback"])
            except Exception:
                pass
        return done


def _describe(exc, filename):
    tb = exc.__traceback__
    # drop the driver's own frames: the traceback starts in the cell
    while tb is not None and tb.tb_frame.f_code.co_filename != filename:
        tb = tb.tb_next
    # and none of the driver's frames after it (a handler of the driver)
    t = tb
    while t is not None:
        while t.tb_next is not None and t.tb_next.tb_frame.f_code.co_filename == _OWN:
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
        "type": _clean(type(exc).__name__),
        "message": _clean(message),
        "traceback": _clean(text),
    }


_Driver().serve()
sys.exit(0)
