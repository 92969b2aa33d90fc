-- Macros every connection gets: the value-equality rule of the metric spec on JSON values.

-- The kind of a JSON value as the spec sees it: int, float, bool, str, null or nested.
-- SQL NULL counts as JSON null (casting an object to a map turns its nulls into SQL NULLs).
create or replace macro json_kind(v) as (
    case coalesce(json_type(v), 'NULL')
        when 'BIGINT' then 'int'
        when 'UBIGINT' then 'int'
        when 'DOUBLE' then
            case when regexp_full_match(v::varchar, '-?[0-9]+') then 'int' else 'float' end
        when 'BOOLEAN' then 'bool'
        when 'VARCHAR' then 'str'
        when 'NULL' then 'null'
        else 'nested'
    end
);

-- A JSON object's members as a map (anything that is not an object: no members).
create or replace macro json_object_map(text) as (
    case
        when json_type(text::json) = 'OBJECT' then text::json::map(varchar, json)
        else map()::map(varchar, json)
    end
);

-- The text that decides equality within a kind: a string's value, otherwise the JSON text.
create or replace macro json_text(v) as (
    case when json_type(v) = 'VARCHAR' then v ->> '$' else coalesce(v::varchar, 'null') end
);

-- Equal per the spec, given each value's kind, number and text (see json_kind, json_text);
-- null when both are lists or objects (decided in Python).
create or replace macro values_equal(a_kind, a_num, a_text, b_kind, b_num, b_text, rel_tol, abs_tol) as (
    case
        when a_kind = 'nested' and b_kind = 'nested' then null
        when a_kind = 'int' and b_kind = 'int' then a_text = b_text
        when a_kind in ('int', 'float') and b_kind in ('int', 'float') then
            case
                -- as math.isclose: NaN equals nothing, an infinity only itself
                when isnan(a_num) or isnan(b_num) then false
                when isinf(a_num) or isinf(b_num) then a_num = b_num
                else abs(a_num - b_num)
                    <= greatest(rel_tol * greatest(abs(a_num), abs(b_num)), abs_tol)
            end
        when a_kind = b_kind and a_kind in ('str', 'bool', 'null') then a_text = b_text
        else false
    end
);

-- Equal per the spec for two JSON values; null when both are lists or objects.
create or replace macro json_equal(a, b, rel_tol, abs_tol) as (
    values_equal(
        json_kind(a), try_cast(a as double), json_text(a),
        json_kind(b), try_cast(b as double), json_text(b),
        rel_tol, abs_tol
    )
);
