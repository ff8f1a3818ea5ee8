"""The verification harness: measure a speculator's acceptance with vLLM and judge it against
the catalog (`specreg verify`, `specreg report`). Heavy dependencies (datasets, matplotlib, vLLM)
are imported only where they are used."""
