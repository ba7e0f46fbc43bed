"""One call's pipeline, a module per stage: checks, the request, the HTTP step, the stream
(pump and reads), the assembler, the finish; `state` holds what the stages share."""
