-- The metadata of each sample and trial with its top-level keys as columns, for an outcome.
with meta as (
    select
        {'sample_id': sample_id, 'trial': trial} as _tcbreplay_row,
        from_json(metadata::json, $structure) as fields
    from samples
)

select
    _tcbreplay_row,
    unnest(fields)
from meta
