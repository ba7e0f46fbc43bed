"""The one schema, answer and pydantic class the per-API structured-output tests share."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temp_c": {"type": "number"}},
    "required": ["city", "temp_c"],
    "additionalProperties": False,
}
ANSWER = {"city": "Paris", "temp_c": 18.5}


class Weather(BaseModel):
    """The weather in one city."""

    city: str
    temp_c: float
