from opcheck.cli.app import main

main()
