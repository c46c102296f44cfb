/**
 * The Python kernel: a script the runner writes into the sandbox and starts as a background process
 * (`python3 -u <path>`). It reads one JSON request per line on stdin and answers each with one line,
 * `\x1e` + JSON, on a private copy of its stdout. Before any user code runs, fd 0 is pointed at
 * /dev/null and, during a cell, fds 1 and 2 at temporary files, so neither `print`, `input()` nor a
 * subprocess can write into (or read from) the protocol: the kernel captures user output itself.
 * A cell's timeout (`timeoutMs`) and a SIGINT both raise KeyboardInterrupt in the cell; the
 * namespace survives. Rich outputs: `display(obj)` and the cell's last value, through the
 * `_repr_png_` / `_repr_html_` / … methods (the IPython protocol), and open matplotlib figures.
 */
export const PYTHON_KERNEL = String.raw`
import ast, base64, io, json, os, signal, sys, tempfile, time, traceback, types

_proto_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
_proto_in = os.fdopen(os.dup(0), "r", encoding="utf-8")
_null = os.open(os.devnull, os.O_RDWR)
os.dup2(_null, 0)
os.dup2(_null, 1)
CAP = int(os.environ.get("SBX_KERNEL_OUTPUT_CAP", "1048576"))

MIME = [("text/html", "_repr_html_"), ("image/png", "_repr_png_"), ("image/jpeg", "_repr_jpeg_"),
        ("image/svg+xml", "_repr_svg_"), ("text/markdown", "_repr_markdown_"), ("text/latex", "_repr_latex_"),
        ("application/json", "_repr_json_"), ("application/javascript", "_repr_javascript_")]

_outputs = []

def _bundle(obj):
    data = {}
    for mime, meth in MIME:
        f = getattr(obj, meth, None)
        if f is None or isinstance(obj, type):
            continue
        try:
            v = f()
        except Exception:
            continue
        if v is None:
            continue
        if isinstance(v, tuple):
            v = v[0]
        if isinstance(v, (bytes, bytearray)):
            v = base64.b64encode(bytes(v)).decode("ascii")
        elif mime == "application/json" and not isinstance(v, str):
            v = json.dumps(v, default=str)
        data[mime] = v
    try:
        data["text/plain"] = repr(obj)
    except Exception as e:
        data["text/plain"] = "<unrepresentable %s: %s>" % (type(obj).__name__, e)
    return data

def display(*objs):
    """Adds each object to the cell's rich outputs (its _repr_*_ formats and its repr)."""
    for o in objs:
        _outputs.append({"type": "display", "data": _bundle(o)})

def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        for n in plt.get_fignums():
            fig = plt.figure(n)
            buf = io.BytesIO()
            fig.savefig(buf, format="png", bbox_inches="tight")
            _outputs.append({"type": "display", "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": repr(fig)}})
        plt.close("all")
    except Exception:
        pass

_main = types.ModuleType("__main__")
_main.__dict__.update({"__builtins__": __builtins__, "display": display})
sys.modules["__main__"] = _main
_ns = _main.__dict__
_count = 0

class _Timeout(KeyboardInterrupt):
    pass

def _on_alarm(signum, frame):
    raise _Timeout("cell timed out")

signal.signal(signal.SIGALRM, _on_alarm)

def _run(code):
    tree = ast.parse(code, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    flags = getattr(ast, "PyCF_ALLOW_TOP_LEVEL_AWAIT", 0)
    body = compile(tree, "<cell>", "exec", flags=flags)
    _await(eval(body, _ns))
    if last is not None:
        return _await(eval(compile(last, "<cell>", "eval", flags=flags), _ns)), True
    return None, False

def _await(v):
    if isinstance(v, types.CoroutineType):
        import asyncio
        return asyncio.run(v)
    return v

def _read(f):
    f.seek(0)
    data = f.read(CAP + 1)
    return data[:CAP].decode("utf-8", "replace"), len(data) > CAP

def _cell(req):
    global _count
    _count += 1
    del _outputs[:]
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
    saved_env = dict(os.environ)
    os.environ.update({str(k): str(v) for k, v in (req.get("env") or {}).items()})
    error, timed_out, value, has_value = None, False, None, False
    t0 = time.time()
    try:
        ms = int(req.get("timeoutMs") or 0)
        if ms > 0:
            signal.setitimer(signal.ITIMER_REAL, ms / 1000.0)
        try:
            value, has_value = _run(req["code"])
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except BaseException as e:
        if isinstance(e, _Timeout):
            timed_out = True
        tb = traceback.format_exception(type(e), e, e.__traceback__)
        tb = [l for l in tb if 'File "' + __file__ + '"' not in l]
        error = {"name": type(e).__name__ if not timed_out else "TimeoutError",
                 "value": str(e) if not timed_out else "the cell ran past its timeout (%d ms) and was interrupted" % ms,
                 "traceback": "".join(tb)}
        if isinstance(e, SystemExit):
            error["name"] = "SystemExit"
    _figures()
    if has_value and value is not None and error is None:
        _ns["_"] = value
        _outputs.append({"type": "result", "data": _bundle(value)})
    try:
        sys.stdout.flush(); sys.stderr.flush()
    except Exception:
        pass
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    os.dup2(_null, 1)
    os.dup2(_null, 2)
    os.environ.clear()
    os.environ.update(saved_env)
    so, t1 = _read(out)
    se, t2 = _read(err)
    out.close(); err.close()
    return {"id": req.get("id"), "stdout": so, "stderr": se, "outputs": list(_outputs), "error": error,
            "executionCount": _count, "timedOut": timed_out, "truncated": t1 or t2,
            "durationMs": int((time.time() - t0) * 1000)}

def _send(msg):
    _proto_out.write("\x1e" + json.dumps(msg, default=str) + "\n")
    _proto_out.flush()

while True:
    try:
        line = _proto_in.readline()
        if not line:
            break
        if not line.strip():
            continue
        req = json.loads(line)
        _send(_cell(req))
    except KeyboardInterrupt:
        continue
`
