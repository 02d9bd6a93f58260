# Run inside gdb on a core by `cargo xtask record-unwind-fixture` (unwind_fixture.rs): for each
# thread, its registers, gdb's own backtrace and the stack bytes that backtrace spans.
#
# A frame is what gdb's `bt` shows less its inline and tail-call frames (gdb makes those up from
# debug information: an inlined function shares its caller's pc and stack, and a function that
# tail-called left no frame behind), i.e. the frames of the machine's stack. The backtrace is
# kept up to the first pc in no executable file mapping nor the vDSO (JIT code): no call-frame
# information covers it, and gdb's frames past it are its heuristics' guesses. The stack is kept
# from rsp to the highest sp of the kept frames: every read an unwinder makes for them lies below.
#
# Input: JOULAR_FIXTURE_MAPS, the process's /proc/<pid>/maps as read at the core. Output:
# JOULAR_FIXTURE_OUT, lines `thread <lwp> <rip> <rsp> <rbp>`, `frame <pc> <sp> <kind> <name>`,
# `stack <address> <hex bytes>`; JOULAR_FIXTURE_VDSO, the vDSO's bytes.
import os

import gdb

executable, vdso = [], None
with open(os.environ["JOULAR_FIXTURE_MAPS"]) as maps:
    for line in maps:
        fields = line.split()
        if len(fields) < 6 or "x" not in fields[1]:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        if fields[5] == "[vdso]":
            vdso = (start, end)
        elif fields[4] == "0" or fields[5].startswith("["):
            continue
        executable.append((start, end))


def in_file(pc):
    return any(start <= pc < end for start, end in executable)


KINDS = {gdb.NORMAL_FRAME: "normal", gdb.SIGTRAMP_FRAME: "sigtramp"}
MADE_UP = (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME)

gdb.execute("set pagination off")
with open(os.environ["JOULAR_FIXTURE_OUT"], "w") as out:
    for thread in gdb.selected_inferior().threads():
        thread.switch()
        frame = gdb.newest_frame()
        reg = lambda f, name: int(f.read_register(name)) & 0xFFFFFFFFFFFFFFFF
        rsp = reg(frame, "rsp")
        out.write("thread %d %#x %#x %#x\n" % (thread.ptid[1], reg(frame, "rip"), rsp, reg(frame, "rbp")))
        top = rsp
        while frame is not None:
            if frame.type() not in MADE_UP:
                pc, sp = frame.pc(), reg(frame, "rsp")
                kind = KINDS.get(frame.type(), "other")
                out.write("frame %#x %#x %s %s\n" % (pc, sp, kind, frame.name() or "??"))
                top = max(top, sp)
                if not in_file(pc):
                    break
            try:
                frame = frame.older()
            except gdb.error:
                break
        data = bytes(gdb.selected_inferior().read_memory(rsp, top - rsp))
        out.write("stack %#x %s\n" % (rsp, data.hex()))

if vdso is not None:
    with open(os.environ["JOULAR_FIXTURE_VDSO"], "wb") as out:
        out.write(bytes(gdb.selected_inferior().read_memory(vdso[0], vdso[1] - vdso[0])))
