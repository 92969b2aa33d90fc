-- Where scoring's parse failed: the first gold list, then the first message of the sides
-- $sides (AI messages: 'agent'; human messages: 'user'), of samples $lo <= sample_index < $hi
-- whose text is not valid JSON (no rows when every one parses).
(
    select
        'samples.parquet' as file,
        sample_id,
        null::integer as position,
        null::varchar as type
    from samples
    where sample_index >= $lo and sample_index < $hi and not json_valid(gold)
    order by sample_index
    limit 1
)

union all

(
    select
        'messages.parquet' as file,
        sample_id,
        position,
        type
    from messages
    where
        (
            (type = 'ai' and list_contains($sides, 'agent'))
            or (type = 'human' and list_contains($sides, 'user'))
        )
        and sample_index >= $lo
        and sample_index < $hi
        and not json_valid(message)
    order by sample_index, position
    limit 1
)
