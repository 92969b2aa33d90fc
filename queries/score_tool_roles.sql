-- The tools samples carry of their own, by name, with the role each declares (null: none).
with own_tools as (
    select
        unnest(cast(tools::json as json[])) as tool
    from samples
    where tools is not null
)

select distinct
    tool ->> 'name' as name,
    tool ->> 'role' as role
from own_tools
order by all
