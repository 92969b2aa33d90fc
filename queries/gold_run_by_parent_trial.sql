-- Another run's calls as gold (_parent_gold: sample_id, trial, gold), keyed by this run's
-- trials: each trial takes the parent trial its metadata names (a serve log's
-- replay.parent_trial), else its own number.
select
    s.sample_id,
    s.trial,
    g.gold
from samples as s
inner join _parent_gold as g
    on
        s.sample_id = g.sample_id
        and g.trial = coalesce(
            try_cast(json_extract(s.metadata::json, '$.replay.parent_trial') as integer), s.trial
        )
