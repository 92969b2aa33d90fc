-- The run's sample indexes cut into $parts ranges of about equal width: lo (inclusive), hi
-- (exclusive), ascending; none when the run has no samples.
with bounds as (
    select min(sample_index)::bigint as first, max(sample_index)::bigint + 1 as stop
    from samples
)

select
    first + (stop - first) * k // $parts as lo,
    first + (stop - first) * (k + 1) // $parts as hi
from bounds, range($parts) as r(k)
where first is not null and lo < hi
order by lo
