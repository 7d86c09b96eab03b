"""The sources of the CmdStan-compatible runtime built from the httpstan wheel."""
