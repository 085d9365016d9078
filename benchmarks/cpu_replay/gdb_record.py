"""gdb script: record what MLX's CPU executor does, dispatch by dispatch, in one process (Linux, MLX CPU wheel).

Why: the CPU op model (profiles/kernels/cpu.yaml, peak/executor.py) guesses how many dispatches each op takes and
which bytes are alive in the run-ahead window. This records the truth for one prompt: every dispatch the host
thread enqueues (``Scheduler::enqueue``, with the dispatched lambda's type: the op's work, the release lambda of
``cpu::eval`` that holds the op's inputs, or the task-completion notification of every 10th dispatch), every
release the stream's worker runs (``cpu::eval``'s lambda invoker) and every change of the allocator's active
bytes (a hardware watchpoint on ``CommonAllocator::active_memory_``, with the thread that made it). ``replay.py``
then computes the live set for any run-ahead window from these events.

Run (``run.sh`` does it): ``REPLAY_OUT=ev.json gdb -q -batch -x gdb_record.py --args python run_call.py ...``.
The inferior's first ``mx.get_peak_memory()`` call only stops gdb to set the breakpoints; recording starts at the
second (``run_call.py`` makes it right after creating the fresh stream it replays on, so dispatch indices are the
stream's own count, which decides where MLX ends its 10-dispatch tasks) and every later call adds a ``MARK``
(``run_call.py`` brackets the call it measures). The symbols and offsets are read from ``libmlx.so`` (``nm``);
``active_memory_`` is the third member of ``CommonAllocator`` after the vtable (mlx/backend/no_gpu/allocator.cpp:
memory_limit_, cache_limit_, active_memory_), 0x18 into the object: checked for mlx 0.32.4 by disassembling
``get_active_memory``. Breakpoints slow the host thread; the replay does not depend on timing (it re-times the
events by dispatch index), which is why it can be compared with undisturbed measurements.
"""
import json
import os
import subprocess

import gdb  # noqa: F401  (provided by gdb)


def _sym(lib, pattern, demangle=False):
    out = subprocess.run(["nm"] + (["-C"] if demangle else []) + [lib], capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.endswith(pattern):
            return int(line.split()[0], 16)
    raise RuntimeError(f"{pattern} not found in {lib}")


LIB = os.environ.get("MLX_LIB") or subprocess.run(
    [os.environ.get("REPLAY_PYTHON", "python3"), "-c", "import mlx, os; print(os.path.join(list(mlx.__path__)[0], 'lib', 'libmlx.so'))"],
    capture_output=True, text=True).stdout.strip()
OFF_PEAK = _sym(LIB, " T _ZN3mlx4core15get_peak_memoryEv")
OFF_ACTIVE = _sym(LIB, " b _ZZN3mlx4core9allocator16common_allocatorEvE10allocator_") + 0x18
OFF_RELEASE = _sym(LIB, "std::_Function_handler<void (), std::_Bind<mlx::core::cpu::eval(mlx::core::array&)::{lambda()#1} ()> >"
                        "::_M_invoke(std::_Any_data const&)", demangle=True)

events: list = []
state = {"on": False, "d": 0, "r": 0, "old": 0, "base": 0}
_names: dict = {}


def _read(addr):
    return int.from_bytes(gdb.selected_inferior().read_memory(addr, 8).tobytes(), "little")


def _kind(invoker):
    """'N' notify (every 10th dispatch's completion task), 'R' cpu::eval's release lambda, 'E' another enqueue,
    else the op's work (the dispatched function's name)."""
    if invoker not in _names:
        try:
            s = gdb.execute(f"info symbol {invoker:#x}", to_string=True).strip()
        except gdb.error:
            s = hex(invoker)
        if "CommandEncoder::dispatch<" in s:
            _names[invoker] = "N"
        elif "cpu::eval(mlx::core::array&)::{lambda" in s:
            _names[invoker] = "R"
        elif "_Bind<" not in s:
            _names[invoker] = "E"  # not a command-encoder dispatch (mx.synchronize's promise): no dispatch count
        else:
            _names[invoker] = s.split("_Bind<", 1)[-1].split("(", 1)[0].replace("mlx::core::", "")[-60:]
    return _names[invoker]


class _Enqueue(gdb.Breakpoint):
    def stop(self):
        if state["on"]:
            # Scheduler::enqueue(this, Stream (rsi, rdx), std::function<void()>& (rcx)); _M_invoker at +24
            k = _kind(_read(int(gdb.parse_and_eval("$rcx")) + 24))
            if k not in ("N", "E"):
                events.append(["D", state["d"], k])
                state["d"] += 1
        return False


class _Release(gdb.Breakpoint):
    def stop(self):
        if state["on"]:
            events.append(["R", state["r"]])
            state["r"] += 1
        return False


class _Active(gdb.Breakpoint):
    def stop(self):
        new = _read(state["base"] + OFF_ACTIVE)
        if state["on"]:
            events.append(["M", gdb.selected_thread().num, new - state["old"], state["d"], state["r"]])
        state["old"] = new
        return False


class _Mark(gdb.Breakpoint):
    def stop(self):
        if not state["on"]:
            state["on"] = True
            state["old"] = _read(state["base"] + OFF_ACTIVE)
        events.append(["MARK", state["d"], _read(state["base"] + OFF_ACTIVE)])
        return False


def _real_only(bp):
    for loc in bp.locations:
        if "plt" in (loc.function or ""):
            loc.enabled = False
    return bp


gdb.execute("set breakpoint pending on")
gdb.execute("set pagination off")
gdb.execute("break mlx::core::get_peak_memory")
gdb.execute("run")  # stops at the inferior's first get_peak_memory(): libmlx is loaded, nothing recorded yet
state["base"] = int(gdb.parse_and_eval("$pc")) - OFF_PEAK
gdb.execute("delete 1")
_real_only(_Enqueue("mlx::core::scheduler::Scheduler::enqueue", internal=True))
_real_only(_Mark("mlx::core::get_peak_memory", internal=True))
_Release(f"*{state['base'] + OFF_RELEASE:#x}", internal=True)
_Active(f"*(unsigned long*){state['base'] + OFF_ACTIVE:#x}", type=gdb.BP_WATCHPOINT, wp_class=gdb.WP_WRITE, internal=True)
gdb.events.exited.connect(lambda e: json.dump(events, open(os.environ.get("REPLAY_OUT", "ev.json"), "w")))
gdb.execute("continue")
