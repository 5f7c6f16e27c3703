from streamproc.cli.main import main

main()
