"""Vendor batch APIs through the same request builders as `stream()`.

    from stream_core.batch import BatchRequest, submit

    job = await submit(
        [BatchRequest("q1", model, context, options), ...], store="runs/jobs", name="eval-1"
    )
    results = await job.collect(interval=30)  # BatchResult(custom_id, outcome, message, batch_id)

Each line is exactly the streaming request minus streaming (tools, `tool_choice`,
structured output, reasoning, cache control, per-model rules), refused at submission as
`stream()` refuses it. Each result is the `AssistantMessage` a stream of that answer gives,
priced at the vendor's batch price; an errored, expired or cancelled request is a message
with its kind, never a lost row. A job lives in a directory (`store`): submitted steps are
journaled before and after the vendor accepts them, so a process killed at any point finds,
polls and collects its job on restart (`submit` with the same name, `open_job`, `recover`).

Batch APIs: Anthropic Message Batches, OpenAI Batch (Chat Completions and Responses),
Gemini batch mode, Vertex AI batch prediction, Mistral batch, Bedrock batch inference
(S3 input and output; `BatchSettings.bucket`, `role_arn`).
"""

from stream_core.provider import BatchCounts, BatchHTTPError, BatchSettings, BatchStatus

from ._job import BatchJob
from ._submit import list_jobs, open_job, recover, submit, vendor_batches
from ._types import BatchRequest, BatchResult, JobProgress

__all__ = [
    "BatchCounts",
    "BatchHTTPError",
    "BatchJob",
    "BatchRequest",
    "BatchResult",
    "BatchSettings",
    "BatchStatus",
    "JobProgress",
    "list_jobs",
    "open_job",
    "recover",
    "submit",
    "vendor_batches",
]
