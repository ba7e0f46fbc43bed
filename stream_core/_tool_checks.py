"""Checking a model's tool-call arguments against the tool's JSON Schema, with bounds.

The arguments are the model's, so untrusted; the schema is the caller's. The check must end
quickly with a short answer whatever the model sent, and must never reach outside the
process. So:

- Only references inside the schema resolve (`#/$defs/...`, an anchor, a subschema with its
  own `$id`): a `$ref` to a URL or a file is a problem of the schema, reported without any
  I/O, and a `$ref` that points nowhere is reported too (not raised).
- Arguments over `MAX_CHECKED_BYTES` of JSON are not checked: the call is refused.
- Errors are produced lazily and the check stops after `MAX_PROBLEMS`; each problem is cut
  to `MAX_PROBLEM_CHARS`. Nothing builds or sorts every error of a huge argument.
- Every keyword checks a deadline (`MAX_CHECK_SECONDS`): a check still running then is
  stopped and the call refused.
- Python's regular expressions cannot be interrupted, so a `pattern` whose nested
  repetition can take exponential time (`^(a+)+$`) is only tried on strings of at most
  `RISKY_PATTERN_MAX_CHARS`; a longer string is refused with that reason.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ._checks import clip

__all__ = [
    "MAX_CHECKED_BYTES",
    "MAX_CHECK_SECONDS",
    "MAX_PROBLEMS",
    "MAX_PROBLEM_CHARS",
    "RISKY_PATTERN_MAX_CHARS",
    "schema_problems",
]

MAX_CHECKED_BYTES = 2 * 1024 * 1024
"""Arguments larger than this (as JSON) are refused rather than checked."""
MAX_CHECK_SECONDS = 5.0
"""A check still running after this long is stopped and the call refused."""
MAX_PROBLEMS = 10
"""At most this many problems are listed (then "and more")."""
MAX_PROBLEM_CHARS = 300
"""Each problem's text is cut to this many characters."""
RISKY_PATTERN_MAX_CHARS = 24
"""The longest string a `pattern` with nested repetition is tried on."""

_state = threading.local()


class _TooSlow(Exception):
    pass


def schema_problems(value: Any, schema: dict[str, Any]) -> list[str]:
    """What `schema` finds wrong with `value`, one short line each (at most `MAX_PROBLEMS`,
    then a line saying more were found), in the JSON Schema draft the schema names (2020-12
    when it names none). A schema that is itself broken (invalid, or a `$ref` that leaves
    it or points nowhere) is one problem saying so. Never raises for a bad value or schema;
    performs no I/O."""
    try:
        import jsonschema
        from referencing import Registry
        from referencing.exceptions import PointerToNowhere, Unresolvable
    except ImportError:  # pragma: no cover - depends on the install
        raise ImportError(
            "checking tool arguments needs jsonschema: pip install 'stream-core[validate]'"
        ) from None
    try:
        size = len(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        return ["the arguments are not JSON the check can read"]
    if size > MAX_CHECKED_BYTES:
        return [
            f"the arguments are {size:,} characters of JSON, over the {MAX_CHECKED_BYTES:,} "
            "this check reads; split the work into smaller calls"
        ]
    base = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        base.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return [clip(f"the tool's own schema is invalid: {exc.message}", MAX_PROBLEM_CHARS)]
    except RecursionError:
        return ["the tool's own schema is nested too deeply to check"]
    registry: Any = Registry(retrieve=_refuse_retrieval)  # type: ignore[call-arg]
    validator = _bounded(base)(schema, registry=registry)
    problems: list[str] = []
    more = False
    _state.deadline = time.monotonic() + MAX_CHECK_SECONDS
    try:
        for error in validator.iter_errors(value):
            if len(problems) == MAX_PROBLEMS:
                more = True
                break
            where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
            problems.append(clip(f"arguments{where}: {error.message}", MAX_PROBLEM_CHARS))
    except _TooSlow:
        return [
            f"checking the arguments took over {MAX_CHECK_SECONDS:g} s and was stopped; "
            "send smaller arguments"
        ]
    except Unresolvable as exc:
        inner = getattr(exc, "_wrapped", exc)  # jsonschema wraps referencing's error
        ref = str(getattr(inner, "ref", ""))
        if isinstance(inner, PointerToNowhere):
            return [
                clip(
                    f"the tool's own schema is invalid: $ref '#{ref}' points nowhere in it",
                    MAX_PROBLEM_CHARS,
                )
            ]
        return [
            clip(
                f"the tool's own schema refers to {ref!r}, outside itself; only references "
                "inside the schema are followed (no URL or file is read)",
                MAX_PROBLEM_CHARS,
            )
        ]
    except RecursionError:
        return ["the arguments or the tool's schema are nested too deeply to check"]
    finally:
        _state.deadline = None
    if more:
        problems.append(f"... and more (the first {MAX_PROBLEMS} are listed)")
    return problems


def _refuse_retrieval(uri: str) -> Any:
    """The registry's `retrieve`: no reference outside the schema is ever fetched."""
    raise LookupError(f"{uri[:100]!r} is outside the schema")


@functools.cache
def _bounded(cls: Any) -> Any:
    """`cls` with every keyword checking the deadline, and `pattern` guarded."""
    import jsonschema

    keywords = {name: _timed(check) for name, check in cls.VALIDATORS.items()}
    if "pattern" in keywords:
        keywords["pattern"] = _timed(_pattern)
    return jsonschema.validators.extend(cls, validators=keywords)


def _timed(check: Callable[..., Any]) -> Callable[..., Iterator[Any]]:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[Any]:
        deadline = getattr(_state, "deadline", None)
        if deadline is not None and time.monotonic() > deadline:
            raise _TooSlow
        found = check(validator, value, instance, schema)
        if found is not None:
            yield from found

    return keyword


def _pattern(validator: Any, pattern: Any, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema import ValidationError

    if not validator.is_type(instance, "string") or not isinstance(pattern, str):
        return
    compiled, risky = _compile(pattern)
    if compiled is None:
        yield ValidationError(f"the schema's pattern {pattern[:60]!r} is not a valid regex")
    elif risky and len(instance) > RISKY_PATTERN_MAX_CHARS:
        yield ValidationError(
            f"a string of {len(instance):,} characters cannot be checked against the pattern "
            f"{pattern[:60]!r} (nested repetition: exponential time) beyond "
            f"{RISKY_PATTERN_MAX_CHARS} characters"
        )
    elif compiled.search(instance) is None:
        yield ValidationError(f"{instance[:60]!r} does not match {pattern[:60]!r}")


@functools.lru_cache(maxsize=256)
def _compile(pattern: str) -> tuple[re.Pattern[str] | None, bool]:
    try:
        compiled = re.compile(pattern)
    except (re.error, RecursionError, OverflowError):
        return None, False
    try:
        parser: Any = importlib.import_module("re._parser")
        risky = _nested_repeat(list(parser.parse(pattern)), parser, inside=False)
    except Exception:  # an internal parser that changed shape: assume the worst
        risky = True
    return compiled, risky


def _nested_repeat(items: list[Any], parser: Any, *, inside: bool) -> bool:
    """A repetition of more than one inside another (star height 2) or a backreference."""
    repeats = (parser.MAX_REPEAT, parser.MIN_REPEAT, getattr(parser, "POSSESSIVE_REPEAT", None))
    for op, arg in items:
        if op in repeats:
            low, high, sub = arg
            unbounded = high is parser.MAXREPEAT or high > 16
            if unbounded and inside:
                return True
            if _nested_repeat(list(sub), parser, inside=inside or unbounded):
                return True
        elif op in (parser.GROUPREF, parser.GROUPREF_EXISTS):
            return True
        elif op == parser.SUBPATTERN:
            if _nested_repeat(list(arg[-1]), parser, inside=inside):
                return True
        elif op == parser.BRANCH:
            if any(_nested_repeat(list(alt), parser, inside=inside) for alt in arg[1]):
                return True
        elif op in (parser.ASSERT, parser.ASSERT_NOT):
            if _nested_repeat(list(arg[1]), parser, inside=inside):
                return True
    return False
