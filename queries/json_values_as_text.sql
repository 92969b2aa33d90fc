-- Each JSON value text in $texts read as text, as json_transform reads a VARCHAR: a string
-- as the characters it stands for (escapes undone), any other value as DuckDB writes it.
select list_transform($texts, lambda t: json_transform(t, '"VARCHAR"')) as texts
