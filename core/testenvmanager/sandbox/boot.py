"""Start the fork server from a compact heap: ``python -I -S -B boot.py CONFIG``.

Every sample process is a fork of the server's image (through its slot's spawner), so every
page of the server's heap is paid per sample: the fork copies its page-table entries, and the
sample's exit tears them down. Compiling the server's modules from source (``forkserver.py``
as a script, and the sandbox modules it loads by path: about 5,000 lines) leaves several
megabytes of the compiler's freed memory behind, still mapped: the server's anonymous memory
was 14.1 MB this way, and 7.5 MB when the same modules came from bytecode (docs/sandbox.md,
"Speed"). Cached bytecode cannot be relied on (``PYTHONDONTWRITEBYTECODE``, read-only installs,
the container backend's read-only harness), so this file, small enough that compiling it costs
nothing, compiles the modules in a short-lived child and loads the code objects it sends back
(:mod:`marshal`, trusted: our own child), then runs ``forkserver.py`` as ``__main__`` exactly
as if it had been started directly (which still works, compiling in-process).

If the child cannot be forked or fails, the modules are compiled here as before.
"""

import marshal
import os
import sys

#: what the server loads: itself and the modules it loads by path (forkserver.SANDBOX_MODULES;
#: the server's ``compact_boot`` fact is False when the two lists drift apart)
MODULES = ("forkserver", "cgroups", "mounts", "walls", "codec", "runner", "boundary")


def _compile_in_child(directory: str) -> dict:
    """``{name: code object}`` for :data:`MODULES`, compiled in a forked child; ``{}`` when
    that fails (the caller then compiles in-process)."""
    read_fd, write_fd = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read_fd)
        os.close(write_fd)
        return {}
    if pid == 0:  # ------------------------------------------------------------ compiler
        code = 1
        try:
            os.close(read_fd)
            blobs = {}
            for name in MODULES:
                path = os.path.join(directory, name + ".py")
                with open(path, "rb") as fh:
                    blobs[name] = marshal.dumps(compile(fh.read(), path, "exec", dont_inherit=True))
            view = memoryview(marshal.dumps(blobs))
            while view:
                view = view[os.write(write_fd, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks = []
    try:
        while True:
            chunk = os.read(read_fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
    _pid, status = os.waitpid(pid, 0)
    if status != 0:
        return {}
    try:
        blobs = marshal.loads(b"".join(chunks))
        del chunks
        return {name: marshal.loads(blobs[name]) for name in MODULES}
    except (EOFError, ValueError, TypeError, KeyError):
        return {}


def main() -> None:
    directory = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(directory, "forkserver.py")
    codes = _compile_in_child(directory)
    server = codes.pop("forkserver", None)
    if server is None:
        with open(path, "rb") as fh:
            server = compile(fh.read(), path, "exec", dont_inherit=True)
    module = type(sys)("__main__")
    module.__file__ = path
    module.__dict__["_PRECOMPILED"] = codes  # forkserver._load takes its modules from here
    sys.modules["__main__"] = module
    exec(server, module.__dict__)  # runs forkserver.main() and exits


if __name__ == "__main__":
    main()
