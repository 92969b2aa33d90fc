-- Messages whose stored calls are not the ones their message holds (the column is derived
-- from the message as the file is written, with tcbreplay._store.schema.MESSAGE_CALLS: an AI
-- or human message's data.tool_calls, null for any other; scoring reads the column): the
-- first few of them, and how many there are.
with without_calls as (
    select
        sample_id,
        trial,
        position,
        calls
    from messages
    where not coalesce(type in ('ai', 'human'), false)
        and calls is not null
),

differing as (
    select
        m.sample_id,
        m.trial,
        m.position,
        m.calls,
        json_extract(m.message, '$.data.tool_calls')::varchar as held
    from messages as m
    where coalesce(m.type in ('ai', 'human'), false)
        and m.calls is distinct from json_extract(m.message, '$.data.tool_calls')::varchar
    union all
    select
        sample_id,
        trial,
        position,
        calls,
        null as held
    from without_calls
)

select
    sample_id,
    trial,
    position,
    calls,
    held,
    count(*) over () as differing
from differing
order by
    sample_id,
    trial,
    position
limit $shown
