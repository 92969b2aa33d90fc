"""The tool-call benchmark's tool universe: a fixed catalog and two arithmetic tools.

Every tool is pure and deterministic, so a trace's tool results depend only on
the calls the agent made.
"""

from __future__ import annotations

CATALOG = (
    {"item_id": 1, "name": "Notebook", "price": 2.50},
    {"item_id": 2, "name": "Pen", "price": 1.20},
    {"item_id": 3, "name": "Backpack", "price": 25.00},
    {"item_id": 4, "name": "Bottle", "price": 8.00},
    {"item_id": 5, "name": "Headphones", "price": 45.00},
)


def list_items() -> dict:
    """List every item in the shop's catalog with its item_id, name and unit price in dollars."""
    return {"items": [dict(item) for item in CATALOG]}


def add_numbers(a: float, b: float) -> dict:
    """Add two numbers and return their sum. Pass the larger of the two numbers as a."""
    return {"result": a + b}


def multiply_numbers(a: float, b: float) -> dict:
    """Multiply two numbers and return their product. Pass the larger of the two numbers as a."""
    return {"result": a * b}


TOOLS = [list_items, add_numbers, multiply_numbers]
