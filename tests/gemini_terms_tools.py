"""Tools whose schemas a Gemini client cannot send whole (defaults, Optional and unions,
bounds, a mapping): recorded with
langchain-google-genai and served back by tests/replay/test_serve_gemini_terms.py."""

from __future__ import annotations

from typing import Literal

from langchain_core.tools import tool
from pydantic import BaseModel, Field


class Item(BaseModel):
    sku: str = Field(description="the item's code")
    qty: int = Field(default=1, ge=1, le=99)


@tool
def order(
    items: list[Item],
    express: bool = False,
    note: str | None = None,
    unit: Literal["kg", "lb"] = "kg",
    tags: dict[str, str] | None = None,
) -> str:
    """Place an order for the items."""
    return "ok"


@tool
def lookup(query: str, limit: int = 5, kind: Literal["a", "b"] | None = None,
           price: float | int = 0) -> str:  # fmt: skip
    """Look something up."""
    return "found"


TOOLS = [order, lookup]
