"""`gateway.py`'s tables, in Markdown, from its result (the same dict `--json` writes)."""

from __future__ import annotations

from typing import Any


def _f(x: Any, digits: int = 2) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        if x != x:
            return "-"
        return f"{x:,.{digits}f}"
    return f"{x:,}" if isinstance(x, int) else str(x)


def _errors(errors: dict[str, int] | None) -> str:
    return ", ".join(f"{k}: {v}" for k, v in (errors or {}).items())


def _table(head: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(head) + " |"]
    out.append("|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|")
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def latency(rows: list[dict[str, Any]]) -> str:
    parts = []
    for mode, what in (("non-stream", "whole answer"), ("stream", "time to first byte")):
        body = []
        for r in sorted(
            (r for r in rows if r["mode"] == mode), key=lambda r: (r["concurrency"], r["side"])
        ):
            direct = r["side"] == "direct"
            body.append(
                [
                    str(r["concurrency"]),
                    r["side"],
                    _f(r["p50_ms"]),
                    _f(r["p99_ms"]),
                    "" if direct else _f(r["added_p50_ms"]),
                    "" if direct else _f(r["added_p99_ms"]),
                    "" if direct else _f(r["ratio_p50"]) + "x",
                    "" if direct else _f(r["ratio_p99"]) + "x",
                    _f(r["req_per_s"], 0),
                    f"{r['failures']}/{r['requests']}"
                    + (f" ({_errors(r.get('errors'))})" if r["failures"] else ""),
                ]
            )
        head = ["concurrency", "side", "p50 ms", "p99 ms", "added p50 ms", "added p99 ms"]
        head += ["p50 ratio", "p99 ratio", "req/s", "failed"]
        parts.append(f"Latency, {mode} ({what}):\n\n" + _table(head, body))
    return "\n\n".join(parts)


def cpu(rows: list[dict[str, Any]]) -> str:
    body = []
    for r in sorted(rows, key=lambda r: (r["mode"], r["side"])):
        body.append(
            [
                r["mode"],
                r["side"],
                f"{r['streams']} x {r['events'] // r['streams']:,}",
                _f(r["proxy_cpu_s"], 3) if r["side"] != "direct" else "",
                _f(r["us_per_event"], 1) if r["side"] != "direct" else "",
                _f(r.get("vs_litellm"), 3) + "x" if r.get("vs_litellm") is not None else "",
                _f(r["vendor_us_per_event"], 1),
                _f(r["wall_s"]),
                str(r["failures"]),
            ]
        )
    head = ["mode", "side", "streams x events", "proxy CPU s", "µs/event", "vs LiteLLM"]
    head += ["vendor µs/event", "wall s", "failed"]
    return "CPU per streamed event (proxy process tree):\n\n" + _table(head, body)


def held(rows: list[dict[str, Any]]) -> str:
    body = []
    for r in rows:
        proxy = r["side"] != "direct"
        body.append(
            [
                r["side"],
                str(r["streams"]),
                f"{r['opened']}",
                _f(r["open_s"]),
                _f(r["rss_base"] / 2**20, 1) if proxy else "",
                _f(r["rss"] / 2**20, 1) if proxy else "",
                _f(r["kib_per_stream"], 1) if proxy else "",
                f"{r['ok']}/{r['streams']}",
                _errors(r["errors"]) or "-",
            ]
        )
    head = ["side", "streams", "open at once (first byte)", "s to open", "RSS before MiB"]
    head += ["RSS open MiB", "KiB per open stream", "complete", "errors"]
    return "Streams held open at once:\n\n" + _table(head, body)


def servers(rows: list[dict[str, Any]]) -> str:
    body = []
    for r in rows:
        body.append(
            [
                r["app"],
                r["server"],
                _f(r.get("seq_p50_ms"), 3),
                _f(r.get("ttfb_p50_ms"), 3),
                _f(r.get("c64_ttfb_p50_ms")),
                _f(r.get("c64_ttfb_p99_ms")),
                _f(r.get("c64_req_per_s"), 0),
                _f(r.get("us_per_event"), 1),
                str(r.get("failures", "-")),
                r.get("note", ""),
            ]
        )
    head = ["app", "server", "seq p50 ms", "seq TTFB p50 ms", "c64 TTFB p50", "c64 TTFB p99"]
    head += ["c64 req/s", "µs/event", "failed", "note"]
    return "ASGI servers:\n\n" + _table(head, body)


def instructions(rows: list[dict[str, Any]]) -> str:
    body = [
        [r["side"], r["mode"], _f(r["per_event"], 0), _f(r.get("per_request"), 0)] for r in rows
    ]
    return "Instructions (cachegrind):\n\n" + _table(
        ["side", "stream", "instructions/event", "instructions/request"], body
    )


def tables(result: dict[str, Any]) -> str:
    m = result.get("machine", {})
    out = [
        "Machine: " + ", ".join(f"{k} {v}" for k, v in m.items()),
        "Versions: " + ", ".join(f"{k} {v}" for k, v in result.get("versions", {}).items()),
        "Command: python benchmarks/gateway.py " + " ".join(result.get("argv", [])),
    ]
    if "sides" in result:
        out.append("Sides: " + ", ".join(result["sides"]))
    for name, fn in (
        ("latency", latency),
        ("cpu", cpu),
        ("held", held),
        ("servers", servers),
        ("instructions", instructions),
    ):
        if result.get(name):
            out.append(fn(result[name]))
    return "\n\n".join(out)
