-- Each JSON text in $texts as DuckDB's writer writes its value: minified, every string
-- escaped one way, numbers in the writer's form (the gold lists the kernels cannot minify
-- as it would: gold.pxi).
select list_transform($texts, lambda t: cast(json(t) as VARCHAR)) as texts
