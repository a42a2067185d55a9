"""The `coral` command line. Each `cmd_<group>.py` module here adds its commands via
`register(app)`; `main.py` discovers them, so command groups never edit each other's files."""
