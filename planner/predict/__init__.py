"""``cmdare-tui predict``: a CSV of shapes in, each row's predicted speed with its band out
(:mod:`.batch`: the CSV contract and parameter-server rows; :mod:`.sync`: synchronous data-parallel rows)."""
