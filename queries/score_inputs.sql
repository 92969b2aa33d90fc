-- The input of every sample in $lo <= sample_index < $hi, in sample_index order (the
-- dashboard file lists it beside the sample's calls).
select
    input
from samples
where sample_index >= $lo and sample_index < $hi
order by sample_index
