-- One row per tool call the agent emitted: AI messages in order, and each message's tool_calls in order.
with ai_messages as (
    select
        run_id,
        sample_id,
        trial,
        position,
        json_transform(
            message,
            '{"data": {"tool_calls": [{"name": "VARCHAR", "args": "JSON", "id": "VARCHAR"}]}}'
        ).data.tool_calls as calls
    from messages
    where type = 'ai'
),

numbered as (
    select
        run_id,
        sample_id,
        trial,
        position,
        calls,
        coalesce(
            sum(len(calls)) over (
                partition by run_id, sample_id, trial
                order by position
                rows between unbounded preceding and 1 preceding
            ),
            0
        ) as first_index
    from ai_messages
    where len(calls) > 0
)

select
    run_id,
    sample_id,
    trial,
    (first_index + unnest(range(len(calls))))::integer as call_index,
    coalesce(unnest(calls).name, '') as name,
    coalesce(unnest(calls).args, '{}'::json) as args,
    unnest(calls).id as call_id,
    position
from numbered
