"""cmdare.tui: the Textual app and the command-line interface."""
