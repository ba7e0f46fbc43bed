"""The stream of one route call: deployments tried in the route's order until one gives
content, the caller seeing one `message_start` and one `message_end` whatever happens.

Each attempt's events are held until its first `message_update` (or its end): a failure
before that is judged by the trigger table and the next deployment tried; after it, the
attempt is the call, and its events pass through untouched.
"""

from __future__ import annotations

import dataclasses
import operator
import time
from collections import deque
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio

from .._events import AssistantStreamEvent, MessageEnd, MessageStart
from .._history.tokens import estimate_context_tokens
from .._models import Model
from .._options import StreamOptions
from .._pipeline.finish import _otel
from .._pipeline.state import _DONE as _STREAM_DONE
from .._pipeline.stream import AssistantStream
from .._transport import _spawn_detached
from .._types import AssistantMessage, Attempt, Context
from .._usage import ErrorKind, StreamError
from . import learn, primary
from .route import COOLING, FALL_OVER, OPT_IN, Deployment, Route

__all__ = ["RouteStream"]

Opener = Callable[[Model, Context, StreamOptions], Any]
"""`stream(model, context, options)`: what opens one deployment's stream."""

# Attempt states: holding (its first content not seen yet), passing, done.
_HOLD, _PASS, _DONE = 0, 1, 2
_UNSET: Any = object()


class RouteStream:
    """Async iterator of one route call's events; `await result()` gives the final message.
    The same surface as `AssistantStream` (`async with`, `aclose()`, `message`)."""

    __slots__ = (
        "_attempts",
        "_began",
        "_context",
        "_current",
        "_deployment",
        "_estimate",
        "_first",
        "_held",
        "_hooked",
        "_anext_now",
        "_next",
        "_open",
        "_options",
        "_plan",
        "_queue",
        "_route",
        "_sent_at",
        "_share",
        "_span",
        "_started",
        "_state",
        "message",
    )

    def __init__(
        self, route: Route, context: Context, options: StreamOptions | None, open_stream: Opener
    ) -> None:
        self._route = route
        self._context = context
        self._options = options or StreamOptions()
        self._open = open_stream
        self._queue: deque[AssistantStreamEvent] = deque()
        self._held: AssistantStreamEvent | None = None
        self._attempts: list[Attempt] = []
        self._estimate: int | None = None
        self._started = time.monotonic()
        self._sent_at = 0.0
        self._state = _HOLD
        self._plan = route.plan(self._options.session_id)
        self._current: Any = None
        self._next: Any = None
        self._anext_now: Callable[[], Awaitable[AssistantStreamEvent]] = self._anext
        self._hooked = False
        self._share: learn.Pending | None = None
        self._deployment: Deployment | None = None
        self._span: Any = _UNSET
        self._began = 0.0  # the route's clock when the attempt in progress was sent
        self._first = self._plan[0]  # the call's first choice
        # The first deployment's request is built now, so a mistake in the call raises
        # here, as it does for one model; the others are built when their turn comes.
        d = self._plan[0]
        if route.ready_in(d) == 0 and self._fits(d):
            del self._plan[0]
            self._start(d, self._open(d.model, context, self._options_for(d)))
        else:
            if self._attempts:  # its window cannot hold the request: recorded, not tried again
                del self._plan[0]
            first = d.model
            self.message = AssistantMessage(api=first.api, provider=first.provider, model=first.id)

    def __repr__(self) -> str:
        return f"<RouteStream {self._route!r}>"

    # --- public surface -------------------------------------------------------------------

    def __aiter__(self) -> RouteStream:
        return self

    if TYPE_CHECKING:

        def __anext__(self) -> Awaitable[AssistantStreamEvent]: ...

    else:
        # `async for` calls what `_anext_now` holds: our `_anext` until the attempt is the
        # call, then the attempt's own `__anext__`, fetched by C code with no frame of ours
        # per event (the attempt tells us its end through `_on_end`).
        __anext__ = property(operator.attrgetter("_anext_now"))

    async def _anext(self) -> AssistantStreamEvent:
        queue = self._queue
        if not queue and self._hooked:
            # A caller that kept our `__anext__` from before the switch.
            hooked: AssistantStreamEvent = await self._next()
            return hooked
        if not queue and self._state == _PASS:
            # A stream of another kind passes through here, its end seen as it goes by.
            event: AssistantStreamEvent = await self._next()
            if event.type == "message_end":
                self._finish(event.message, content=True)
            return event
        while not queue:
            if self._state == _DONE:
                raise StopAsyncIteration
            await self._step()
        event = queue.popleft()
        if self._hooked and not queue:
            self._anext_now = self._next
        return event

    async def result(self) -> AssistantMessage:
        """Read the rest of the stream and return the final message."""
        async for _ in self:
            pass
        return self.message

    async def aclose(self) -> None:
        """Stop now: the message ends `aborted` if it was unfinished."""
        if self._state == _DONE:
            return
        current = self._current
        if current is None:
            self._end_synthetic(StreamError(kind="aborted", message="stream closed by the caller"))
            return
        holding = self._state == _HOLD
        await current.aclose()
        if self._hooked:
            return  # its end was recorded through `_on_end`; its message_end is queued
        queue = self._queue
        if holding:
            queue.clear()
            if self._held is not None:
                queue.append(self._held)
        self._state = _PASS
        async for event in current:  # what the attempt queued as it closed
            if event.type == "message_end":
                self._finish(event.message, content=not holding)
            queue.append(event)

    async def __aenter__(self) -> RouteStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- attempts -------------------------------------------------------------------------

    def _options_for(self, d: Deployment) -> StreamOptions:
        """The caller's options; while another deployment is ready, with no retries of
        this one (the route moves on rather than wait: see the routes guide)."""
        route = self._route
        if primary.waits(route, d):
            return self._options  # the primary's own retries: see `_routes.primary`
        if self._options.max_retries and any(route.ready_in(o) == 0 for o in self._plan):
            return dataclasses.replace(self._options, max_retries=0)
        return self._options

    def _fits(self, d: Deployment) -> bool:
        """Whether `d`'s window can hold the estimated request; if not, recorded unsent."""
        window = d.model.context_window
        if self._estimate is None:
            if window >= self._route.largest_window:
                return True  # no window is larger: the vendor judges, as for one model
            self._estimate = estimate_context_tokens(self._context)
        if self._estimate <= window:
            return True
        self._record(d, "context_overflow", None, sent=False)
        return False

    def _start(self, d: Deployment, stream: Any) -> None:
        self._current, self._deployment = stream, d
        self._next = stream.__anext__
        self._state = _HOLD
        self._held = None
        self._sent_at = time.monotonic()
        self._began = self._route.clock()
        d.in_flight += 1
        self.message = stream.message
        if isinstance(stream, AssistantStream):
            # Passed over, not waited for, while its limit is reached and another is ready.
            # A primary the route waits for is never passed over (`_routes.primary`).
            route = self._route
            stream._pass_over = not primary.waits(route, d) and any(
                route.ready_in(o) == 0 for o in self._plan
            )

    async def _next_deployment(self) -> bool:
        """Open the next untried deployment that is ready, waiting, when every one left is
        cooling, for the earliest within the call's limits (or for a primary the route
        waits for: `primary.pick`). False when none is left (the call has ended, or the
        caller ends it with the last attempt's kind)."""
        route = self._route
        while self._plan:
            d, wait = primary.pick(route, self._plan, self._may_wait)
            if wait > 0 or d is None:
                if not self._may_wait(wait):
                    self._end_synthetic(learn.cooling_error(wait, self._attempts))
                    return False
                cancel = self._options.cancel
                if cancel is None:
                    await anyio.sleep(wait)
                else:
                    with anyio.move_on_after(wait):
                        await cancel.wait()
                    if cancel.is_set():
                        self._end_synthetic(
                            StreamError(kind="aborted", message="cancelled by options.cancel")
                        )
                        return False
                continue
            self._plan.remove(d)
            if not self._fits(d):
                continue
            try:
                stream = self._open(d.model, self._context, self._options_for(d))
            except (TypeError, ValueError) as e:
                # A control or value this deployment cannot take: a caller mistake, which
                # falls over to nothing.
                self._record(d, "invalid_request", None, sent=False)
                self._end_synthetic(
                    StreamError(kind="invalid_request", message=f"{d.label}: {e}"), d.model
                )
                return False
            self._start(d, stream)
            return True
        return False

    def _may_wait(self, wait: float) -> bool:
        options = self._options
        if wait > options.max_retry_delay:
            return False
        total = options.total_timeout
        return total is None or time.monotonic() - self._started + wait <= total

    async def _step(self) -> None:
        if self._current is None and not await self._next_deployment():
            if self._state != _DONE:
                last = self._attempts[-1] if self._attempts else None
                self._end_synthetic(
                    StreamError(
                        kind=(last.kind if last and last.kind else "invalid_request"),
                        message=self._summary(),
                    )
                )
            return
        span = self._span
        if span is _UNSET:
            otel = _otel()
            span = otel.start_route_span(len(self._route.deployments)) if otel else None
            self._span = span
        if span is not None and self._state == _HOLD:
            # An attempt's chat span starts as it connects: under the route's span.
            otel = _otel()
            token = otel.enter_span(span)
            try:
                event = await self._current.__anext__()
            finally:
                otel.leave_span(token)
        else:
            event = await self._current.__anext__()
        self._take(event)
        if self._share is not None:
            pending, self._share = self._share, None
            await learn.share(self._route, pending)

    def _take(self, event: AssistantStreamEvent) -> None:
        kind = event.type
        if self._state == _PASS:
            if kind == "message_end":
                self._finish(event.message, content=True)
            self._queue.append(event)
            return
        if kind == "message_start":
            self._held = event
        elif kind == "message_update":
            self._state = _PASS
            if self._held is not None:
                self._queue.append(self._held)
            self._queue.append(event)
            current = self._current
            if isinstance(current, AssistantStream):
                # From here the caller reads the attempt itself, with no frame of ours per
                # event; its end is recorded as it happens, or now if the whole body came
                # at once (its message is final and its message_end queued).
                self._hooked = True
                if current._state == _STREAM_DONE:
                    self._finish(current.message, content=True)
                else:
                    current._on_end = self._attempt_ended
        else:  # message_end before any content: fall over, or end here
            message = event.message
            error = message.error
            if error is not None and self._falls_over(error.kind) and self._plan:
                self._fail_over(message, error)
                return
            if self._held is not None:
                self._queue.append(self._held)
            self._finish(message, content=False)
            self._queue.append(event)

    def _attempt_ended(self, message: AssistantMessage) -> None:
        self._finish(message, content=True)
        if self._share is not None:
            pending, self._share = self._share, None
            route = self._route
            _spawn_detached(lambda: learn.share(route, pending))

    def _falls_over(self, kind: ErrorKind) -> bool:
        return (
            kind in FALL_OVER
            or kind == "context_overflow"
            or (kind in OPT_IN and self._route.refusals_fall_over)
        )

    def _fail_over(self, message: AssistantMessage, error: StreamError) -> None:
        d = self._deployment
        assert d is not None
        d.in_flight -= 1
        learn.failed(self, d, error, content=False)
        self._current = self._deployment = None
        self._held = None

    def _finish(self, message: AssistantMessage, *, content: bool) -> None:
        """The attempt that is the call ended: note it, and put the record on the message."""
        d = self._deployment
        assert d is not None
        d.in_flight -= 1
        self._state = _DONE
        error = message.error
        if error is None:
            learn.served(self, d, message, content)
        else:
            learn.failed(self, d, error, content)
            if error.kind != "aborted" and (content or len(self._attempts) > 1):
                note = (
                    "; the route's next call skips it while it cools"
                    if error.kind in COOLING
                    else ""
                )
                error.message = f"{d.label}: {error.message}{note}"
                if not content and len(self._attempts) > 1:
                    error.message += f" ({self._summary()})"
        # Set in place (no validation: the records were built here), as the assembler
        # sets block fields.
        message.__dict__["attempts"] = list(self._attempts)
        self.message = message
        self._current = None
        self._end_span(message)

    def _record(
        self, d: Deployment, kind: ErrorKind | None, status: int | None, sent: bool
    ) -> None:
        self._attempts.append(learn.attempt(d, kind, status, None, sent, False, self._sent_at))

    def _summary(self) -> str:
        return learn.summary(self._attempts)

    def _end_synthetic(self, error: StreamError, model: Model | None = None) -> None:
        """End the call with no attempt's message to show: one start, one end."""
        model = model or self._route.deployments[0].model
        message = AssistantMessage(api=model.api, provider=model.provider, model=model.id)
        message.stop_reason = "error" if error.kind != "aborted" else "aborted"
        message.error = error
        message.attempts = list(self._attempts)
        self.message = message
        self._state = _DONE
        self._end_span(message)
        self._queue.append(MessageStart(message))
        self._queue.append(MessageEnd(message))

    def _end_span(self, message: AssistantMessage) -> None:
        span, self._span = self._span, None
        if span is not None and span is not _UNSET:
            _otel().end_route_span(span, message)
