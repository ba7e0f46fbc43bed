"""Run-level pieces for an evaluation or any fleet of calls, small and composable, for
streams and batches alike:

    from stream_core.runs import ResultLog, Progress, cost_summary

    log = ResultLog("results.jsonl")              # resume keyed by your ids
    progress = Progress("eval-7", total=len(ids))  # across workers, in the limiter's store
    for q in log.pending(ids):
        message = await complete(model, contexts[q], options)
        log.write(q, message)
        await progress.add(message)
    print(progress.line(await progress.read()))
    print(cost_summary(ResultLog.read("results.jsonl")).table())

The command line reads the same: `stream-core progress NAME --store URL`,
`stream-core cost RESULTS.jsonl`. Each name is imported when first used.
"""

import importlib as _importlib

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ._cost import CostRow, CostSummary, cost_summary
    from ._log import ResultLog, ResultRow, RowId
    from ._progress import Progress, ProgressView

_LAZY: dict[str, tuple[str, ...]] = {
    "_cost": ("CostRow", "CostSummary", "cost_summary"),
    "_log": ("ResultLog", "ResultRow", "RowId"),
    "_progress": ("Progress", "ProgressView"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}

__all__ = [
    "CostRow",
    "CostSummary",
    "Progress",
    "ProgressView",
    "ResultLog",
    "ResultRow",
    "RowId",
    "cost_summary",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module = _HOME.get(name)
        if module is None:
            raise AttributeError(f"module 'stream_core.runs' has no attribute {name!r}")
        value = getattr(_importlib.import_module(f"{__name__}.{module}"), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})


del TYPE_CHECKING
