-- Each JSON type a metadata field ($pointer) holds, with the first sample and trial holding it.
with typed as (
    select
        sample_id,
        trial,
        sample_index,
        json_type(metadata::json, $pointer) as kind
    from samples
    where json_type(metadata::json) = 'OBJECT'
)

select
    kind,
    arg_min(sample_id, (sample_index, trial)) as sample_id,
    arg_min(trial, (sample_index, trial)) as trial
from typed
where kind is not null
    and kind != 'NULL'
group by kind
order by min((sample_index, trial))
