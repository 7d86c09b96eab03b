"""The CmdStan runtime: finding or building it, compiling programs, running its methods."""
