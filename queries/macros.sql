-- Macros every connection gets: the value-equality rule of the metric spec on JSON values.

-- The kind of a JSON value as the spec sees it: int, float, bool, str, null or nested.
create or replace macro json_kind(v) as (
    case json_type(v)
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

-- Equal per the spec; null when both values are lists or objects (decided in Python).
create or replace macro json_equal(a, b, rel_tol, abs_tol) as (
    case
        when json_kind(a) = 'nested' and json_kind(b) = 'nested' then null
        when json_kind(a) = 'int' and json_kind(b) = 'int' then a::varchar = b::varchar
        when json_kind(a) in ('int', 'float') and json_kind(b) in ('int', 'float') then
            -- try_cast: constant folding may evaluate this branch for values of other kinds
            case
                -- as math.isclose: NaN equals nothing, an infinity only itself
                when isnan(try_cast(a as double)) or isnan(try_cast(b as double)) then false
                when isinf(try_cast(a as double)) or isinf(try_cast(b as double))
                    then try_cast(a as double) = try_cast(b as double)
                else abs(try_cast(a as double) - try_cast(b as double))
                    <= greatest(
                        rel_tol * greatest(abs(try_cast(a as double)), abs(try_cast(b as double))),
                        abs_tol
                    )
            end
        when json_kind(a) = 'str' and json_kind(b) = 'str' then (a ->> '$') = (b ->> '$')
        when json_kind(a) = 'bool' and json_kind(b) = 'bool' then a::varchar = b::varchar
        when json_kind(a) = 'null' and json_kind(b) = 'null' then true
        else false
    end
);
