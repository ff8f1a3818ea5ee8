"""specreg's built-in algorithms: one module per speculators_model_type, named after it (the folder
is listed to find them; see specreg.normalization.algorithms).

Installed as `specreg.algos` (pyproject maps this folder into the package). Each module holds one
function decorated with `specreg.register_speculator`, whose docstring tables the fields it reads.
"""
