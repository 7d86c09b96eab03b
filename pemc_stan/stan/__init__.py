"""The Stan front end: a program and its data read once, parsed to a frozen AST, analysed."""
