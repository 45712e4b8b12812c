"""The files `bench new` writes (`bench.kit.scaffold` fills them with `string.Template`): package data."""
