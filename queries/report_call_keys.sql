-- The argument keys of each agent call of _calls (s, name, args as canonical JSON text): the
-- report pairs only the samples whose calls may pass a key their tool does not take. Args
-- that are no JSON come as a null key (such a sample is paired to know); null args have none.
with calls as (
    select
        s,
        coalesce(name, '') as name,
        args
    from _calls
    where args is not null
)

select distinct
    s,
    name,
    unnest(case when json_valid(args) then json_keys(args) else [null] end) as key
from calls
