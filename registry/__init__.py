"""The catalog's data (TOML files under <org>/); read through `specreg.catalog`, never imported."""
