from pddkit.cli.app import entry

entry()
