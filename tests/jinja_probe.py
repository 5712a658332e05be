"""Render Jinja2 templates in a child process bounded in CPU time and address space (``resource.setrlimit``
plus a wall-clock timeout), so that a test can show what a hostile template does to a real renderer without
risking the test run: an escape is shown by what the output holds, exhaustion by the child being stopped.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

CHILD = r"""
import json, resource, sys
cpu, memory, kind = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
import jinja2, jinja2.sandbox
cases = json.load(sys.stdin)
if kind == "plain":
    env = jinja2.Environment(extensions=["jinja2.ext.loopcontrols"])
else:
    env = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.loopcontrols"])
out = []
for text, context in cases:
    try:
        out.append(["ok", env.from_string(text).render(**context)[:4000]])
    except MemoryError:
        out.append(["memory", ""])
    except Exception as e:
        out.append(["error", (type(e).__name__ + ": " + str(e))[:500]])
print(json.dumps(out))
"""


@dataclass
class Rendered:
    status: str  #: ok, error, memory (MemoryError under the limit), cpu (killed at the CPU limit or the timeout)
    output: str


def render(cases: list[tuple[str, dict]], kind: str = "plain", cpu: int = 10, memory: int = 1 << 30, timeout: float = 60) -> list[Rendered]:
    """Render every (template, context) in one child; ``kind`` is ``plain`` (jinja2.Environment, what
    CVE-2024-34359's renderer used) or ``sandbox`` (jinja2.sandbox.SandboxedEnvironment)."""
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(cpu), str(memory), kind], input=json.dumps(cases), capture_output=True, text=True, timeout=timeout
    )
    if child.returncode != 0:
        raise RuntimeError(f"renderer child failed ({child.returncode}): {child.stderr[-2000:]}")
    return [Rendered(status, output) for status, output in json.loads(child.stdout)]


def exhausts(cases: list[tuple[str, dict, str]], cpu: int = 1, memory: int = 512 << 20) -> list[str]:
    """For each (template, context, kind), rendered alone in its own child (all children at once): ``cpu``
    when the child hit the CPU limit or the timeout, ``memory`` on MemoryError, else ``ok``/``error``."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(cpu), str(memory), kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _, _, kind in cases
    ]
    results = []
    for child, (text, context, _) in zip(children, cases, strict=True):
        try:
            out, _ = child.communicate(json.dumps([[text, context]]), timeout=cpu * 10 + 20)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            results.append("cpu")
            continue
        if child.returncode != 0:  # SIGXCPU (or SIGKILL past the hard limit)
            results.append("cpu" if child.returncode < 0 else "error")
        else:
            results.append(json.loads(out)[0][0])
    return results
