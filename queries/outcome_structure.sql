-- The combined JSON structure of the samples' metadata objects (null when none has any).
select
    json_group_structure(metadata::json) as structure
from samples
where json_type(metadata::json) = 'OBJECT'
