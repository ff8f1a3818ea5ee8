from specreg.cli import run

run()
