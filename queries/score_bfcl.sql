-- Each sample (and trial) with its gold calls and its AI messages in order, as the bfcl scorer reads them.
with ai as (
    select
        sample_index,
        list(message order by position) as messages
    from messages
    where type = 'ai'
    group by sample_index
)

select
    samples.sample_id,
    samples.trial,
    samples.sample_index,
    samples.category,
    samples.status,
    samples.gold,
    coalesce(ai.messages, []) as messages
from samples
left join ai on ai.sample_index = samples.sample_index
order by samples.sample_index
