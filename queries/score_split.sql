-- The run's sample indexes cut into $parts ranges of about equal width: lo (inclusive), hi
-- (exclusive), in order; each row also says how many samples have no sample_index, and how
-- many no sample_id, at all.
with bounds as (
    select
        min(sample_index)::bigint as first,
        max(sample_index)::bigint + 1 as stop,
        count(*) - count(sample_index) as unnumbered,
        count(*) - count(sample_id) as unnamed
    from samples
)

select
    unnumbered,
    unnamed,
    first + (stop - first) * k // $parts as lo,
    first + (stop - first) * (k + 1) // $parts as hi
from bounds, range($parts) as r(k)
order by k
