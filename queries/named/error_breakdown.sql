-- Samples that did not finish cleanly, by run, status and error type, with one example message.
-- params: run_id = null
select
    run_id,
    status,
    coalesce(error_type, '') as error_type,
    count(*) as samples,
    sum(attempts) as attempts,
    min(error) as example_error
from samples
where ($run_id is null or run_id = $run_id) and status <> 'ok'
group by run_id, status, error_type
order by run_id, samples desc, error_type
