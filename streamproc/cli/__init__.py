"""The `streamproc` command line."""
