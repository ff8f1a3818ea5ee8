"""An example specreg algorithm plugin (see README.md); specreg imports `example_eagle3` through the
`specreg.algorithms` entry point."""
