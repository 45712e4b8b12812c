"""The files `bench new` writes (`bench.scaffold` fills them with `string.Template`): package data."""
