-- The argument keys of each agent call of _calls (s, i: its number in the sample, name, args
-- as canonical JSON text): the report pairs only the samples whose calls may pass a key their
-- tool does not take. Args that are no JSON, or may be beyond the limits Python reads JSON
-- within (more than $depth arrays and objects, or an integer of more than $digits digits),
-- come as a null key (such a call is read in Python to know); null args have none.
with calls as (
    select
        s,
        i,
        coalesce(name, '') as name,
        args,
        json_valid(args)
        and (
            length(args) <= $depth
            or length(args) - length(replace(replace(args, '[', ''), '{', '')) <= $depth
        )
        and (
            length(args) <= $digits
            or not regexp_matches(args, '[0-9]{' || ($digits + 1) || '}')
        ) as plain
    from _calls
    where args is not null
)

select distinct
    s,
    i,
    name,
    unnest(case when plain then json_keys(args) else [null] end) as key
from calls
