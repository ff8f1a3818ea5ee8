"""The catalog's entries (the data lives in the top-level `registry/` folder): schema, rule checks, lookup and pinning. Not named `catalog`, which is the public function `specreg.catalog()`."""
