#!/usr/bin/env python3
"""keys.py -- how fast each workbench key shows on the screen while a step
works, measured from outside the way a person sees it: through tmux.

Usage: tests/tui/bench/keys.py [--ditto PATH] [--presses N] [--size COLSxROWS]

A fake LLM server (tests/llm/fake_llm_server.py) streams the plan step's
answer a word every 20 ms for the whole measurement, so the loop is busy
drawing tokens when the keys arrive. For each key the script sends it with
`tmux send-keys` and polls `tmux capture-pane` until the screen shows what
the key does (an overlay or prompt appears, or goes away); the time from
the send to that screen is one sample. It prints the median and the maximum
per key over N presses (default 25). Nothing is asserted: the goal (every
key within 50 ms) is read off the table. The samples include tmux's own
send and capture (a few ms each), so they are an upper bound on ditto's
part.
"""

import argparse
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def tmux(sock, *args, capture=False):
    r = subprocess.run(["tmux", "-L", sock] + list(args), capture_output=True, text=True)
    return r.stdout if capture else r.returncode


def screen(sock):
    return tmux(sock, "capture-pane", "-p", "-t", "T", capture=True)


def wait_for(sock, pred, timeout):
    """Poll the screen until pred(screen) holds; the time it took, or None."""
    t0 = time.monotonic()
    while True:
        if pred(screen(sock)):
            return time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ditto", default=os.path.join(SRC, "ditto"))
    ap.add_argument("--presses", type=int, default=25)
    ap.add_argument("--size", default="120x40")
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    if shutil.which("tmux") is None:
        sys.exit("keys.py: tmux is not installed")
    d = tempfile.mkdtemp(prefix="ditto-keys-")
    sock = "ditto-keys-%d" % os.getpid()
    words = ["w%05d%s" % (i, "\n" if i % 12 == 0 else " ") for i in range(1, 30001)]
    with open(os.path.join(d, "transcript.json"), "w") as f:
        json.dump([{"text": words, "delay": 0.02}], f)
    with open(os.path.join(d, "spec.json"), "w") as f:
        f.write('{"op": "spmv", "matrix": "gen:banded:rows=20000,bw=1", "dtype": "fp32", '
                '"backend": "llm", "review": "auto"}\n')
    server = subprocess.Popen(
        [sys.executable, os.path.join(SRC, "tests/llm/fake_llm_server.py"),
         os.path.join(d, "transcript.json"), os.path.join(d, "llm.log")],
        stdout=subprocess.PIPE, text=True)
    port = server.stdout.readline().strip()
    script = os.path.join(d, "run.sh")
    with open(script, "w") as f:
        f.write("cd '%s'\nexport LANG=C.UTF-8 XDG_DATA_HOME='%s/data' XDG_CONFIG_HOME='%s/config' "
                "XDG_CACHE_HOME='%s/cache' DITTO_SHARE='%s' no_proxy=127.0.0.1 NO_PROXY=127.0.0.1\n"
                "unset ESCDELAY\n"
                "'%s' tui spec.json --backend llm --api openai --endpoint http://127.0.0.1:%s/v1 "
                "--model fake-model --no-session\nsleep 60\n"
                % (d, d, d, d, os.environ.get("DITTO_SHARE", SRC), a.ditto, port))
    results = []
    try:
        subprocess.run(["env", "-u", "TMUX", "tmux", "-L", sock, "-f", "/dev/null", "new-session",
                        "-d", "-s", "T", "-x", str(cols), "-y", str(rows), "sh " + script],
                       check=True)
        if wait_for(sock, lambda s: "running plan" in s and "w00024" in s, 60) is None:
            sys.exit("keys.py: the plan step never started streaming:\n" + screen(sock))
        # (key to send, what the screen shows once it acted, what it must not
        #  show before) -- pairs open and close the same overlay
        steps = [
            ("?", lambda s: "┌─ Keys" in s, "help (?)"),
            ("Escape", lambda s: "┌─ Keys" not in s, "Esc closes help"),
            ("/", lambda s: "Search:" in s, "search prompt (/)"),
            ("Escape", lambda s: "Search:" not in s, "Esc closes a prompt"),
            ("?", lambda s: "┌─ Keys" in s, None),
            ("q", lambda s: "┌─ Keys" not in s, "q closes help"),
            ("k", lambda s: "Esc back" in s, "k knowledge screen"),
            ("Escape", lambda s: "Esc back" not in s, "Esc closes knowledge"),
        ]
        samples = {}
        for _ in range(a.presses):
            for key, pred, name in steps:
                t0 = time.monotonic()
                tmux(sock, "send-keys", "-t", "T", key)
                took = wait_for(sock, pred, 5)
                if took is None:
                    sys.exit("keys.py: %s did not act within 5 s:\n%s" % (key, screen(sock)))
                if name:
                    samples.setdefault(name, []).append((time.monotonic() - t0) * 1000)
                time.sleep(0.03)
        still = "running plan" in screen(sock)
        print("| key | presses | median ms | max ms |")
        print("|---|---|---|---|")
        for name, v in samples.items():
            results.append((name, len(v), statistics.median(v), max(v)))
            print("| %s | %d | %.1f | %.1f |" % results[-1])
        print("\n%s, %s, %s; the plan step was %s streaming throughout" % (
            datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            a.size, os.path.relpath(a.ditto, SRC), "still" if still else "NOT"))
    finally:
        tmux(sock, "kill-server")
        server.kill()
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
