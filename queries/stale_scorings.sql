-- The stored scorings that are of their run's files before they changed (the run recorded
-- or folded since it was scored): of run $run_id, or of every run when it is null.
select run_id, scoring
from scorings
where stale and ($run_id is null or run_id = $run_id)
order by run_id, scoring
