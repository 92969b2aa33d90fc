-- The first (sample_id, trial) that more than one sample row holds, if any: a run's rows are
-- keyed by them.
select
    sample_id,
    trial
from samples
group by
    sample_id,
    trial
having count(*) > 1
order by
    sample_id,
    trial
limit 1
