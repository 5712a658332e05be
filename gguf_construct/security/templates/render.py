"""The dynamic check: render a template in Jinja2's sandbox in a child process, under limits, with
representative conversations (short, long, with tools), so that render cost the static bounds miss is measured.

The child is a fresh ``python -I`` that imports only jinja2, with an empty environment, a temporary working
folder, ``RLIMIT_AS`` (address space), ``RLIMIT_CPU``, ``RLIMIT_FSIZE`` 0 (it writes no file) and no core dumps; each
render has an interval timer, and the parent kills the child's process group at a wall-clock deadline. Templates
that raise (an unsupported role, ``raise_exception``) are not findings: only running out of time or memory, an
output longer than the limit, or the sandbox refusing an operation (``SecurityError``) is.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

#: the child: argv = seconds per render, address-space bytes, output characters; stdin = {"template", "conversations"}
CHILD = r"""
import json, resource, signal, sys, time
seconds, memory, max_chars = float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])

def lower(kind, value):  # never above a hard limit the parent already has (raising it is refused)
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))

lower(resource.RLIMIT_AS, memory)
lower(resource.RLIMIT_FSIZE, 0)
lower(resource.RLIMIT_CORE, 0)
lower(resource.RLIMIT_CPU, int(seconds * 4) + 2)
job = json.loads(sys.stdin.read())
import jinja2.ext, jinja2.nodes, jinja2.sandbox

class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}
    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)

class Expired(BaseException):
    pass

def expire(signum, frame):
    raise Expired()

def raise_exception(message):
    raise jinja2.TemplateError(message)

def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

env = jinja2.sandbox.SandboxedEnvironment(extensions=["jinja2.ext.loopcontrols", GenerationTag], trim_blocks=True, lstrip_blocks=True)
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
env.globals["strftime_now"] = lambda fmt: time.strftime(fmt)
signal.signal(signal.SIGALRM, expire)
try:
    template = env.from_string(job["template"])
except Exception as e:
    print(json.dumps(["", "error", type(e).__name__]), flush=True)
    sys.exit(0)
print(json.dumps(["", "ready", ""]), flush=True)
for name, context in job["conversations"]:
    start = time.perf_counter()
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        out = template.render(**context)
        status, detail = ("output", str(len(out))) if len(out) > max_chars else ("ok", str(len(out)))
    except Expired:
        status, detail = "time", ""
    except MemoryError:
        status, detail = "memory", ""
    except jinja2.sandbox.SecurityError as e:
        status, detail = "sandbox", str(e)[:200]
    except RecursionError:
        status, detail = "recursion", ""
    except Exception as e:
        status, detail = "error", type(e).__name__
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps([name, status, detail, round(time.perf_counter() - start, 3)]), flush=True)
    if status not in ("ok", "error"):
        break
"""


def conversations() -> list[tuple[str, dict[str, Any]]]:
    """The render contexts: a short exchange, a long one (200 turns), and one with tools and a tool call."""
    base = {"bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True}
    short = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, who are you?"},
    ]
    long = [{"role": "system", "content": "Be brief."}] + [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"Turn {i}: " + "words and more words " * 10} for i in range(200)
    ]
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "The city."}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
    call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 1}}}
    tools = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": '{"temperature": 21}'},
        {"role": "user", "content": "Thanks."},
    ]
    return [
        ("short", {**base, "messages": short}),
        ("long", {**base, "messages": long}),
        ("tools", {**base, "messages": tools, "tools": [weather]}),
    ]


def render_check(text: str, limits: Mapping[str, int], budget: float | None = None) -> list[tuple[int, str, str]]:
    """Findings (line, rule, why) of rendering ``text`` in the sandbox with each conversation, within the
    limits of ``schema/template_rules.json`` (``render_seconds``, ``render_memory_bytes``, ``render_output_chars``),
    never longer than ``budget`` seconds of wall time."""
    seconds = float(limits["render_seconds"])
    cases = conversations()
    deadline = seconds * len(cases) + 5.0 if budget is None else max(min(budget, seconds * len(cases) + 5.0), 1.0)
    job = json.dumps({"template": text, "conversations": cases})
    args = [sys.executable, "-I", "-c", CHILD, str(seconds), str(limits["render_memory_bytes"]), str(limits["render_output_chars"])]
    with tempfile.TemporaryDirectory(prefix="gguf-construct-render-") as folder:
        child = subprocess.Popen(
            args,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=folder,
            env={"PATH": os.defpath},
            start_new_session=True,
        )
        try:
            out, _ = child.communicate(job.encode("utf-8", "surrogatepass"), timeout=deadline)
        except subprocess.TimeoutExpired:
            _kill(child)
            return [(1, "template.render", f"the sandboxed render ran past {deadline:.0f} s of wall time (killed)")]
        finally:
            _kill(child)
    return _findings(out.decode("utf-8", "replace"), child.returncode, limits)


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def _findings(out: str, returncode: int | None, limits: Mapping[str, int]) -> list[tuple[int, str, str]]:
    results = []
    for line in out.splitlines()[:16]:
        try:
            results.append(json.loads(line))
        except ValueError:
            continue
    found: list[tuple[int, str, str]] = []
    for name, status, detail, *_ in (r for r in results if isinstance(r, list) and len(r) >= 3):
        with_ = f"with the {name} conversation"
        if status == "time":
            found.append((1, "template.render", f"rendering {with_} took more than {limits['render_seconds']} s"))
        elif status in ("memory", "recursion"):
            found.append((1, "template.render", f"rendering {with_} ran out of memory or stack ({limits['render_memory_bytes']:,} bytes)"))
        elif status == "output":
            found.append(
                (1, "template.render", f"rendering {with_} made {int(detail):,} characters (more than {limits['render_output_chars']:,})")
            )
        elif status == "sandbox":
            found.append((1, "template.sandbox", f"rendering {with_}, the sandbox refused: {detail}"))
    ready = any(isinstance(r, list) and r[:2] in (["", "ready"], ["", "error"]) for r in results)
    if not ready:  # the child died before it could render (no memory for Python itself, no jinja2): nothing measured
        return [(1, "template.unrendered", f"not rendered: the sandbox process did not start (exit status {returncode})")]
    if not found and returncode not in (0, None):
        found.append((1, "template.render", f"the sandboxed render was stopped (exit status {returncode}: a CPU or memory limit)"))
    return found
