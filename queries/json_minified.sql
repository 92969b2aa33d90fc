-- Each text of the table _texts (i, t) registered by the caller, in the order of i, as
-- DuckDB's JSON writer writes its value: minified, every string escaped one way, numbers in
-- the writer's form (the gold lists the kernels cannot read as it would: gold.pxi). Fails on
-- a text that is no JSON.
select cast(json(t) as VARCHAR) as t
from _texts
order by i
