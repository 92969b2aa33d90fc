"""The terms the Gemini wire compares tools in: what its clients leave out is no
difference, what they send is."""

from __future__ import annotations

import pytest

from tcbreplay._replay.gemini_terms import output_terms, schema_terms

ALIKE = [
    ({"type": "integer", "default": 1, "minimum": 1, "maximum": 99}, {"type": "INTEGER"}),
    ({"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
     {"type": "STRING", "nullable": True}),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]},
     {"any_of": [{"type": "STRING"}, {"type": "NULL"}]}),
    ({"type": ["string", "null"]}, {"type": "STRING", "nullable": True}),
    ({"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "null"}]},
     {"type": "OBJECT", "nullable": True}),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
     {"type": "STRING", "nullable": True}),
    ({"type": "object", "properties": {"x": {}}, "title": "T"},
     {"type": "OBJECT", "properties": {"x": {"type": "STRING"}}, "propertyOrdering": ["x"]}),
    ({"type": "number", "enum": [1.0, 2]}, {"type": "NUMBER", "enum": [1, 2]}),
    # (LangChain describes a property named title that has no description itself)
    ({"type": "object", "properties": {"title": {"type": "string"}}},
     {"type": "OBJECT", "properties": {"title": {"type": "STRING",
                                                 "description": "title is {'type': 'string'}"}}}),
]  # fmt: skip
DIFFERENT = [
    ({"type": "object", "properties": {"title": {"type": "string", "description": "a"}}},
     {"type": "OBJECT", "properties": {"title": {"type": "STRING", "description": "b"}}}),
    ({"type": "integer"}, {"type": "NUMBER"}),
    ({"type": "string", "description": "a"}, {"type": "STRING", "description": "b"}),
    ({"type": "string", "enum": ["a", "b"]}, {"type": "STRING", "enum": ["a"]}),
    ({"anyOf": [{"type": "string"}, {"type": "null"}]}, {"type": "STRING"}),
    ({"type": "object", "properties": {"a": {"type": "string"}}},
     {"type": "OBJECT", "properties": {"a": {"type": "STRING"}, "b": {"type": "STRING"}}}),
    ({"type": "object", "required": ["a"]}, {"type": "OBJECT"}),
    ({"type": "array", "items": {"type": "string"}},
     {"type": "ARRAY", "items": {"type": "INTEGER"}}),
]  # fmt: skip


@pytest.mark.parametrize(("recorded", "sent"), ALIKE)
def test_what_a_client_leaves_out_is_no_difference(recorded, sent):
    assert schema_terms(recorded, True) == schema_terms(sent, True)


@pytest.mark.parametrize(("recorded", "sent"), DIFFERENT)
def test_what_a_client_sends_otherwise_is_a_difference(recorded, sent):
    assert schema_terms(recorded, True) != schema_terms(sent, True)


@pytest.mark.parametrize(
    ("recorded", "sent"),
    [("42\n", "42"), ({"output": "hello"}, "hello"), ([0, 1, 2], "[0, 1, 2]"),
     ({"a": 1}, {"a": 1.0}), ("not json", "not json"),
     ("ab", [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]),
     ("42", [{"type": "text", "text": "42"}]),
     # (google-genai's automatic function calling sends a function's value under result)
     ("hi", {"result": "hi"}), ("42\n", {"result": "42\n"}),
     ({"output": "hello"}, {"result": {"output": "hello"}}), ([0, 1], {"result": [0, 1]})],
)  # fmt: skip
def test_a_tool_output_is_the_response_a_client_sends_for_it(recorded, sent):
    assert output_terms(recorded) == output_terms(sent)


@pytest.mark.parametrize(
    ("recorded", "sent"),
    [("42\n", "43"), ({"output": "hello"}, "bye"), ("hi", {"result": "hi", "more": 1})],
)
def test_another_tool_output_is_a_difference(recorded, sent):
    assert output_terms(recorded) != output_terms(sent)


# (recorded, sent): keywords both sides hold, and a union with null both send whole, are
# compared (google-genai sends them); what one side leaves out is still no difference
SAID_BY_BOTH = [
    ({"type": "string", "format": "date-time"}, {"type": "STRING", "format": "date"}),
    ({"type": "integer", "minimum": 1}, {"type": "INTEGER", "minimum": 2}),
    ({"type": "integer", "default": 1}, {"type": "integer", "default": 2}),
    ({"type": "object", "default": {"a": 1}}, {"type": "object", "default": {"a": "1"}}),
    ({"type": "object", "default": {"type": "x"}}, {"type": "object", "default": {"Type": "x"}}),
    ({"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]},
     {"anyOf": [{"type": "boolean"}, {"type": "string"}, {"type": "null"}]}),
    ({"anyOf": [{"type": "object", "additionalProperties": {"type": "string"}}, {"type": "null"}]},
     {"anyOf": [{"type": "object", "additionalProperties": {"type": "integer"}},
                {"type": "null"}]}),
]  # fmt: skip


@pytest.mark.parametrize(("recorded", "sent"), SAID_BY_BOTH)
def test_what_both_sides_say_otherwise_is_a_difference(recorded, sent):
    assert schema_terms(recorded, True, sent, True) != schema_terms(sent, True, recorded)


@pytest.mark.parametrize(("recorded", "sent"), ALIKE)
def test_what_a_client_leaves_out_is_no_difference_compared_with_it(recorded, sent):
    assert schema_terms(recorded, True, sent, True) == schema_terms(sent, True, recorded)


PARCEL = {"type": "object", "description": "A parcel.", "required": ["weight"],
          "properties": {"weight": {"type": "number"}, "fragile": {"type": "boolean"}}}  # fmt: skip
# (recorded, sent): an item's union LangChain sends as its last type
ITEM_UNIONS = [
    ({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
     {"type": "ARRAY", "items": {"type": "STRING"}}, True),
    ({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
     {"type": "ARRAY", "items": {"type": "BOOLEAN"}}, False),
    # (a union a request sends where the recording has one type: a change, not a loss)
    ({"type": "string"}, {"anyOf": [{"type": "integer"}, {"type": "string"}]}, False),
    ({"type": "string", "nullable": True},
     {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}, False),
    # (list[Model | None]: LangChain sends the item's type alone, the model's fields not)
    ({"type": "array", "items": {"anyOf": [PARCEL, {"type": "null"}]}},
     {"type": "ARRAY", "items": {"type": "OBJECT", "nullable": True}}, True),
    ({"type": "array", "items": {"anyOf": [PARCEL, {"type": "null"}]}},
     {"type": "ARRAY", "items": {"type": "OBJECT"}}, False),
    ({"type": "array", "items": {"anyOf": [PARCEL, {"type": "null"}]}},
     {"type": "ARRAY", "items": {"type": "ARRAY", "nullable": True}}, False),
    ({"type": "array", "items": {"anyOf": [PARCEL, {"type": "null"}]}},
     {"type": "ARRAY", "items": {"type": "OBJECT", "nullable": True,
                                 "properties": {"weight": {"type": "STRING"}}}}, False),
    # (a property's union LangChain sends with the model's fields: no fields, a change)
    ({"anyOf": [PARCEL, {"type": "null"}]}, {"type": "OBJECT", "nullable": True}, False),
]  # fmt: skip


@pytest.mark.parametrize(("recorded", "sent", "alike"), ITEM_UNIONS)
def test_a_union_the_request_sends_as_one_type_is_its_last(recorded, sent, alike):
    same = schema_terms(recorded, True, sent, True) == schema_terms(sent, True, recorded)
    assert same is alike


# (recorded, sent, alike): properties as langchain-google-genai sends them
AS_LANGCHAIN_SENDS = [
    ({"type": "object", "description": "any"}, {"type": "STRING", "description": "any"}, True),
    ({"type": "object", "properties": {"a": {"type": "integer"}}}, {"type": "STRING"}, False),
    ({"type": "object", "additionalProperties": {"type": "string"}}, {"type": "STRING"}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
      "required": ["b"]},
     {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}, "b": {"type": "STRING"}},
      "required": ["a", "b"]}, True),
    ({"type": "object", "properties": {"a": {"type": "integer", "default": 1},
                                       "b": {"type": "string"}, "c": {"type": "string"}},
      "required": ["b"]},
     {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}, "b": {"type": "STRING"},
                                       "c": {"type": "STRING"}}, "required": ["a", "b"]}, False),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
      "required": ["b"]},
     {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}, "b": {"type": "STRING"}},
      "required": ["a"]}, False),
    # (deeper down LangChain has dropped the defaults: every property is required)
    ({"type": "object", "properties": {"a": {"type": "integer", "default": 1},
                                       "b": {"type": "string"}}, "required": ["b"]},
     {"type": "OBJECT", "properties": {"a": {"type": "INTEGER"}, "b": {"type": "STRING"}},
      "required": ["a", "b"]}, True),
]  # fmt: skip


AS_LANGCHAIN_SENDS += [
    ({"type": ["integer", "null"]}, {"type": "STRING"}, True),
    ({"type": ["string", "integer"]}, {"type": "STRING"}, True),
    ({"type": ["integer", "null"]}, {"type": "INTEGER", "nullable": True}, True),
    ({"type": ["integer", "null"]}, {"type": "INTEGER"}, False),
    ({"type": "integer"}, {"type": "STRING"}, False),
]  # fmt: skip


@pytest.mark.parametrize(("recorded", "sent", "alike"), AS_LANGCHAIN_SENDS)
def test_a_property_as_langchain_sends_it_is_alike(recorded, sent, alike):
    same = schema_terms(recorded, True, sent, True) == schema_terms(sent, True, recorded)
    assert same is alike


def test_a_schemas_local_refs_are_what_they_name():
    """pydantic's model_json_schema keeps a nested model under $defs; the recording has it
    in place."""
    from tcbreplay._replay.gemini_terms import tool_terms

    item = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    recorded = {
        "description": "",
        "required": [],
        "parameters": {"items": {"type": "array", "items": item}},
    }
    sent = {
        "description": "",
        "required": [],
        "$defs": {"Item": {**item, "title": "Item"}},
        "parameters": {"items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
    }
    assert tool_terms(recorded, sent, True) == tool_terms(sent, recorded)
    changed = {**sent, "$defs": {"Item": {**item, "required": []}}}
    assert tool_terms(recorded, changed, True) != tool_terms(changed, recorded)
